-- What a learner did since p_since, each as the instant it happened: their messages in chats (a
-- turn), a chat's self-evaluation (the first and the latest: a repeat keeps only those), and a
-- recall's evaluation (its done_at). The days of these make the streak (bff_achievements, and the
-- streak push's sweep, bff_streak_sweep). Every part is a range of an index on the learner, so a
-- recent p_since costs what happened since, not the learner's history: messages through the
-- chats touched since (a chat's updated_at is stamped with each of its messages, the stamp taken
-- just before the message's own; the minute's slack covers that gap), then each chat's messages
-- by time. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_learner_facts(p_user uuid, p_since timestamptz)
RETURNS TABLE (at timestamptz, kind text)
LANGUAGE sql STABLE AS $$
    SELECT m.created_at, 'turn'
    FROM chats c JOIN messages m ON m.chat_id = c.id
    WHERE c.user_id = p_user AND c.updated_at >= p_since - interval '1 minute'
      AND m.user_id = p_user AND m.role = 'user' AND m.created_at >= p_since
    UNION ALL
    SELECT e.created_at, 'evaluation' FROM chat_evaluations e
    WHERE e.user_id = p_user AND e.updated_at >= p_since AND e.created_at >= p_since
    UNION ALL
    SELECT e.updated_at, 'evaluation' FROM chat_evaluations e
    WHERE e.user_id = p_user AND e.updated_at >= p_since AND e.updated_at > e.created_at
    UNION ALL
    SELECT r.done_at, 'recall' FROM recalls r
    WHERE r.user_id = p_user AND r.status = 'done' AND r.done_at >= p_since
$$;
