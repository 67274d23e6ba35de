-- Stores a tutoring turn after the LLM answered, in one statement and so in one transaction
-- (ChatTurn.store): a new chat when p_chat is NULL (its stamp from bff_chat_stamp), the chat's
-- counters and preview, the learner's message (none for an instant question, p_message NULL) and the
-- reply, the misconception tags' extraction job (bff_enqueue_jobs, kind p_tag_kind, once per reply),
-- and the answer a retry with the Idempotency-Key replays (bff_answer_idempotency_key, the turn's
-- result as ChatTurn.Result decodes it). The chat takes the turn only while it is not deleted and not
-- ended, or reopened by an opened recall: `outcome` is stored, ended (it ended while the LLM
-- answered) or gone (deleted meanwhile), and nothing is written unless stored. This file is its one
-- full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_store_turn(
    p_user uuid, p_chat uuid, p_title text, p_subject text, p_topic text, p_message text, p_reply text, p_model text,
    p_prompt_tokens integer, p_completion_tokens integer, p_operation text, p_key text, p_tag_kind text,
    p_jobs_channel text)
RETURNS TABLE (outcome text, turn_chat uuid, user_message uuid, user_micros bigint, reply_message uuid, reply_micros bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_chat uuid := p_chat;
    v_at timestamptz;
    v_user_message uuid;
    v_user_micros bigint;
    v_reply uuid;
    v_reply_micros bigint;
    v_body jsonb;
BEGIN
    IF v_chat IS NULL THEN
        INSERT INTO chats (user_id, title, subject_id, topic_id, created_at, updated_at)
        SELECT p_user, p_title, p_subject, p_topic, stamp.at, stamp.at FROM (SELECT bff_chat_stamp(p_user) AS at) stamp
        RETURNING id INTO v_chat;
    END IF;
    UPDATE chats c SET message_count = c.message_count + CASE WHEN p_message IS NULL THEN 1 ELSE 2 END,
        last_message_preview = left(p_reply, 140), updated_at = bff_chat_stamp(p_user)
    WHERE c.id = v_chat AND c.user_id = p_user AND c.deleted_at IS NULL
      AND (c.status <> 'ended' OR EXISTS (
          SELECT 1 FROM recalls r WHERE r.chat_id = c.id AND r.user_id = c.user_id AND r.status = 'opened'));
    IF NOT FOUND THEN
        RETURN QUERY SELECT
            CASE WHEN EXISTS (SELECT 1 FROM chats c WHERE c.id = v_chat AND c.user_id = p_user AND c.deleted_at IS NULL AND c.status = 'ended')
                 THEN 'ended' ELSE 'gone' END,
            v_chat, NULL::uuid, NULL::bigint, NULL::uuid, NULL::bigint;
        RETURN;
    END IF;
    -- One clock reading for both messages, the reply a microsecond later: the pair sorts in order.
    v_at := clock_timestamp();
    IF p_message IS NOT NULL THEN
        INSERT INTO messages (chat_id, user_id, role, content, created_at)
        VALUES (v_chat, p_user, 'user', p_message, v_at)
        RETURNING id, (extract(epoch FROM created_at) * 1000000)::int8 INTO v_user_message, v_user_micros;
    END IF;
    INSERT INTO messages (chat_id, user_id, role, content, created_at, model, prompt_tokens, completion_tokens)
    VALUES (v_chat, p_user, 'assistant', p_reply, v_at + interval '1 microsecond', p_model, p_prompt_tokens, p_completion_tokens)
    RETURNING id, (extract(epoch FROM created_at) * 1000000)::int8 INTO v_reply, v_reply_micros;
    -- Tags are read from the learner's words: an instant question has none yet.
    IF p_message IS NOT NULL THEN
        PERFORM bff_enqueue_jobs(
            p_tag_kind, ARRAY[jsonb_build_object('chatID', v_chat)], ARRAY[p_user], ARRAY[v_chat::text || '@' || v_reply::text],
            ARRAY[NULL::timestamptz], 5, p_jobs_channel);
    END IF;
    IF p_key IS NOT NULL THEN
        v_body := jsonb_build_object(
                'chatID', v_chat,
                'reply', jsonb_build_object('id', v_reply, 'role', 'assistant', 'content', p_reply, 'createdMicros', v_reply_micros))
            || CASE WHEN p_message IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('userMessage', jsonb_build_object(
                        'id', v_user_message, 'role', 'user', 'content', p_message, 'createdMicros', v_user_micros)) END;
        PERFORM bff_answer_idempotency_key(p_user, p_operation, p_key, 200, convert_to(v_body::text, 'UTF8'));
    END IF;
    RETURN QUERY SELECT 'stored'::text, v_chat, v_user_message, v_user_micros, v_reply, v_reply_micros;
END
$$;
