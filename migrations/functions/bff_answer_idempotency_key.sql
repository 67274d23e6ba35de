-- Stores the response a retry with the same Idempotency-Key replays (IdempotencyStore, the one owner
-- of `idempotency_keys`), in the caller's transaction: chat creation through IdempotencyStore.answer,
-- the tutoring turn inside bff_store_turn. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_answer_idempotency_key(
    p_user uuid, p_operation text, p_key text, p_status integer, p_body bytea)
RETURNS void
LANGUAGE sql AS $$
    UPDATE idempotency_keys SET status_code = p_status, response_body = p_body
    WHERE user_id = p_user AND operation = p_operation AND key = p_key
$$;
