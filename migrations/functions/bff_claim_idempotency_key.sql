-- Takes an Idempotency-Key for a new request (IdempotencyStore, the one owner of `idempotency_keys`):
-- true when this request owns it now; false when it is taken: answered within its lifetime, or still
-- running, unless that claim is older than p_stale_seconds (a process that died mid-request; NULL:
-- never stale). Chat creation calls it through IdempotencyStore.claim, the tutoring turn inside
-- bff_admit_turn. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_claim_idempotency_key(
    p_user uuid, p_operation text, p_key text, p_request_hash bytea, p_lifetime_seconds double precision,
    p_stale_seconds double precision)
RETURNS boolean
LANGUAGE sql AS $$
    WITH claimed AS (
        INSERT INTO idempotency_keys (user_id, operation, key, request_hash)
        VALUES (p_user, p_operation, p_key, p_request_hash)
        ON CONFLICT (user_id, operation, key) DO UPDATE
            SET request_hash = excluded.request_hash, status_code = NULL, response_body = NULL, created_at = now()
            WHERE idempotency_keys.created_at < now() - make_interval(secs => p_lifetime_seconds)
               OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < now() - make_interval(secs => p_stale_seconds))
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM claimed)
$$;
