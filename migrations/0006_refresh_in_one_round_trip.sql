-- The rate limiter and the refresh-token rotation as functions, so that a refresh is one
-- statement: one round trip and one transaction instead of five to six (DESIGN §7, issue 3's
-- benchmark). The rules are those of RefreshTokenStore and RateLimiter, which call these.

-- GCRA over rate_limits (see 0004): counts one request against p_key, at most p_rate per
-- p_period seconds, bursts included. ON CONFLICT DO UPDATE evaluates SET against the latest row
-- version under its row lock, which is what makes concurrent callers on any replica agree; a
-- refusal rewrites the same tat. `ahead` is how far tat now lies in the future, in seconds.
-- PL/pgSQL rather than SQL: a SQL function that writes is planned again on every call, a
-- PL/pgSQL one keeps its plan for the session.
CREATE FUNCTION bff_rate_limit_take(p_key text, p_rate integer, p_period double precision,
                                    OUT allowed boolean, OUT ahead double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_step interval := make_interval(secs => p_period / p_rate);
    v_burst interval := make_interval(secs => p_period);
BEGIN
    INSERT INTO rate_limits AS r (key, tat, last_allowed) VALUES (p_key, v_now + v_step, true)
    ON CONFLICT (key) DO UPDATE SET
        tat = CASE WHEN greatest(r.tat, v_now) + v_step <= v_now + v_burst
                   THEN greatest(r.tat, v_now) + v_step
                   ELSE r.tat END,
        last_allowed = greatest(r.tat, v_now) + v_step <= v_now + v_burst
    RETURNING r.last_allowed, EXTRACT(EPOCH FROM r.tat - v_now)::float8 INTO allowed, ahead;
END
$$;

-- One-time rotation of the refresh token whose SHA-256 is p_parent_hash, on device p_device_id.
-- The child token is derived from the parent by the server (HMAC), so its hash p_child_hash is
-- known before the call and a retry inside p_reuse_seconds is answered with the same child.
-- outcome: 'rotated' (issued_at, expires_at and the user's row are set), 'unknown', 'expired',
-- 'revoked', 'reused' and 'device_mismatch' (both revoke the family), or 'rate_limited' (the
-- family's limit; retry_after seconds). The family row lock serialises concurrent presentations
-- of one token.
--
-- The per-address limit of /api/v1/auth/* (p_address_key, unless NULL) is counted here too, so
-- the request needs no statement of its own, and last, so that the address's row (shared by every
-- client behind one NAT) stays locked only until the commit that follows. Beyond the limit the
-- function raises SQLSTATE BF429 with the limiter's `ahead` as DETAIL: the whole statement rolls
-- back, as if the request had been refused before it began.
CREATE FUNCTION bff_refresh_rotate(
    p_parent_hash bytea, p_child_hash bytea, p_device_id text, p_lifetime_seconds integer,
    p_reuse_seconds integer, p_family_rate integer, p_family_period double precision,
    p_address_key text, p_address_rate integer, p_address_period double precision,
    OUT outcome text, OUT family_id uuid, OUT user_id uuid, OUT issued_at timestamptz,
    OUT expires_at timestamptz, OUT retry_after double precision, OUT email text, OUT display_name text,
    OUT address_allowed boolean, OUT address_ahead double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_allowed boolean;
    v_ahead double precision;
    v_revoked boolean;
    v_bound_device text;
    v_expired boolean;
BEGIN
    <<rotation>>
    BEGIN
        SELECT f.id, f.user_id, f.revoked_at IS NOT NULL, t.device_id, t.expires_at <= now()
        INTO family_id, user_id, v_revoked, v_bound_device, v_expired
        FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id
        WHERE t.token_hash = p_parent_hash
        FOR UPDATE OF f;
        IF NOT FOUND THEN
            outcome := 'unknown';
            EXIT rotation;
        END IF;

        SELECT l.allowed, l.ahead INTO v_allowed, v_ahead
        FROM bff_rate_limit_take('refresh:family:' || family_id, p_family_rate, p_family_period) l;
        IF NOT v_allowed THEN
            outcome := 'rate_limited';
            retry_after := greatest(0, v_ahead + p_family_period / p_family_rate - p_family_period);
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

        UPDATE refresh_tokens t SET used_at = now() WHERE t.token_hash = p_parent_hash AND t.used_at IS NULL;
        IF FOUND THEN
            INSERT INTO refresh_tokens AS t (token_hash, family_id, parent_hash, device_id, issued_at, expires_at)
            VALUES (p_child_hash, family_id, p_parent_hash, p_device_id, date_trunc('second', now()),
                    date_trunc('second', now()) + make_interval(secs => p_lifetime_seconds))
            RETURNING t.issued_at, t.expires_at INTO issued_at, expires_at;
        ELSE
            -- Already used: a lost response retried within the interval gets the unused child again.
            SELECT c.issued_at, c.expires_at INTO issued_at, expires_at
            FROM refresh_tokens p JOIN refresh_tokens c ON c.token_hash = p_child_hash AND c.parent_hash = p.token_hash
            WHERE p.token_hash = p_parent_hash AND c.used_at IS NULL
              AND p.used_at > now() - make_interval(secs => p_reuse_seconds);
            IF NOT FOUND THEN
                UPDATE refresh_families f SET revoked_at = now(), revoked_reason = 'reuse_detected'
                WHERE f.id = family_id AND f.revoked_at IS NULL;
                outcome := 'reused';
                EXIT rotation;
            END IF;
        END IF;

        SELECT u.email, u.display_name INTO email, display_name FROM users u WHERE u.id = bff_refresh_rotate.user_id;
        IF NOT FOUND THEN
            outcome := 'revoked';
            EXIT rotation;
        END IF;
        -- Last seen to the minute: a family refreshed in a burst writes its device once.
        IF NOT EXISTS (SELECT 1 FROM devices d
                       WHERE d.device_id = p_device_id AND d.user_id = bff_refresh_rotate.user_id
                         AND d.last_seen_at > now() - interval '1 minute') THEN
            INSERT INTO devices AS d (device_id, user_id, last_seen_at) VALUES (p_device_id, bff_refresh_rotate.user_id, now())
            ON CONFLICT (device_id) DO UPDATE SET user_id = excluded.user_id, last_seen_at = now();
        END IF;
        outcome := 'rotated';
    END rotation;

    IF p_address_key IS NOT NULL THEN
        SELECT l.allowed, l.ahead INTO address_allowed, address_ahead
        FROM bff_rate_limit_take(p_address_key, p_address_rate, p_address_period) l;
        IF NOT address_allowed THEN
            RAISE EXCEPTION 'per-address rate limit' USING ERRCODE = 'BF429', DETAIL = address_ahead::text;
        END IF;
    END IF;
END
$$;
