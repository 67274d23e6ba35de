-- The refresh rotation: one statement that rotates a refresh token, answers a retry within the
-- reuse interval with the same child, revokes the family on reuse or a device mismatch, counts the
-- family's rate limit and touches the device (RefreshTokens.swift calls it as a prepared
-- statement). This file is its one full text: edit it here, and `bff migrate` replaces the
-- database's definition. Its arguments and result columns are its signature, which a previous
-- release may still call during a rolling deploy: to change them, add a numbered migration that
-- drops the old signature, then change this file (README, "Stored functions").
-- The per-address limit (p_address_*) is no longer passed (NULL): refresh is limited per family.
CREATE OR REPLACE FUNCTION bff_refresh_rotate_ring(
    p_parent_hash bytea, p_child_hashes bytea[], p_device_id text, p_lifetime_seconds integer,
    p_reuse_seconds integer, p_family_rate integer, p_family_period double precision,
    p_address_key text, p_address_rate integer, p_address_period double precision,
    OUT outcome text, OUT child_hash bytea, OUT family_id uuid, OUT user_id uuid, OUT issued_at timestamptz,
    OUT expires_at timestamptz, OUT retry_after double precision, OUT email text, OUT display_name text,
    OUT address_allowed boolean, OUT address_ahead double precision, OUT scope text)
LANGUAGE plpgsql AS $$
DECLARE
    v_allowed boolean;
    v_ahead double precision;
    v_revoked boolean;
    v_bound_device text;
    v_expired boolean;
    v_used_at timestamptz;
BEGIN
    <<rotation>>
    BEGIN
        SELECT f.id, f.user_id, f.scope, f.revoked_at IS NOT NULL, t.device_id, t.expires_at <= now()
        INTO family_id, user_id, scope, v_revoked, v_bound_device, v_expired
        FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id
        WHERE t.token_hash = p_parent_hash
        FOR UPDATE OF f;
        IF NOT FOUND THEN
            outcome := 'unknown';
            EXIT rotation;
        END IF;
        IF v_revoked THEN
            outcome := 'revoked';
            EXIT rotation;
        END IF;
        IF v_bound_device <> p_device_id THEN
            UPDATE refresh_families f SET revoked_at = now(), revoked_reason = 'device_mismatch'
            WHERE f.id = family_id AND f.revoked_at IS NULL;
            outcome := 'device_mismatch';
            EXIT rotation;
        END IF;
        IF v_expired THEN
            outcome := 'expired';
            EXIT rotation;
        END IF;

        -- Read after the family's lock, in a statement of its own: the join above may have waited
        -- for a concurrent rotation and then still show the token's row as it was before it.
        SELECT t.used_at INTO v_used_at FROM refresh_tokens t WHERE t.token_hash = p_parent_hash;
        IF v_used_at IS NOT NULL THEN
            -- Already used: a lost response retried within the interval gets the unused child again.
            SELECT c.token_hash, c.issued_at, c.expires_at INTO child_hash, issued_at, expires_at
            FROM refresh_tokens c
            WHERE c.token_hash = ANY (p_child_hashes) AND c.parent_hash = p_parent_hash AND c.used_at IS NULL
              AND v_used_at > now() - make_interval(secs => p_reuse_seconds);
            IF NOT FOUND THEN
                UPDATE refresh_families f SET revoked_at = now(), revoked_reason = 'reuse_detected'
                WHERE f.id = family_id AND f.revoked_at IS NULL;
                outcome := 'reused';
                EXIT rotation;
            END IF;
        END IF;

        SELECT l.allowed, l.ahead INTO v_allowed, v_ahead
        FROM bff_rate_limit_take('refresh:family:' || family_id, p_family_rate, p_family_period) l;
        IF NOT v_allowed THEN
            outcome := 'rate_limited';
            retry_after := greatest(0, v_ahead + p_family_period / p_family_rate - p_family_period);
            EXIT rotation;
        END IF;

        IF v_used_at IS NULL THEN
            UPDATE refresh_tokens t SET used_at = now() WHERE t.token_hash = p_parent_hash;
            INSERT INTO refresh_tokens AS t (token_hash, family_id, parent_hash, device_id, issued_at, expires_at)
            VALUES (p_child_hashes[1], family_id, p_parent_hash, p_device_id, date_trunc('second', now()),
                    date_trunc('second', now()) + make_interval(secs => p_lifetime_seconds))
            RETURNING t.token_hash, t.issued_at, t.expires_at INTO child_hash, issued_at, expires_at;
        END IF;

        SELECT u.email, u.display_name INTO email, display_name FROM users u WHERE u.id = bff_refresh_rotate_ring.user_id;
        IF NOT FOUND THEN
            outcome := 'revoked';
            EXIT rotation;
        END IF;
        -- Last seen to the minute: a family refreshed in a burst writes its device once.
        IF NOT EXISTS (SELECT 1 FROM devices d
                       WHERE d.device_id = p_device_id AND d.user_id = bff_refresh_rotate_ring.user_id
                         AND d.last_seen_at > now() - interval '1 minute') THEN
            INSERT INTO devices AS d (device_id, user_id, last_seen_at) VALUES (p_device_id, bff_refresh_rotate_ring.user_id, now())
            ON CONFLICT (device_id) DO UPDATE SET user_id = excluded.user_id, last_seen_at = now();
        END IF;
        outcome := 'rotated';
    END rotation;

    IF p_address_key IS NOT NULL THEN
        SELECT l.allowed, l.ahead INTO address_allowed, address_ahead
        FROM bff_rate_limit_take(p_address_key, p_address_rate, p_address_period) l;
        -- Over the address's limit the statement rolls back, but not a revocation: its 401 is the
        -- answer, and the caller still reports the limit in the headers.
        IF NOT address_allowed AND outcome NOT IN ('reused', 'device_mismatch') THEN
            RAISE EXCEPTION 'per-address rate limit' USING ERRCODE = 'BF429', DETAIL = address_ahead::text;
        END IF;
    END IF;
END
$$;
