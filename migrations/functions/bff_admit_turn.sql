-- Admits a tutoring turn in one statement, after its context was read and every refusal that needs
-- no counting was made (ChatTurn.prepare): the plan's day (bff_reserve_turn; p_allowed NULL is a plan
-- without a daily limit), then the rate limit (bff_rate_limit_take; a turn the plan refuses is not
-- counted by it), then the Idempotency-Key (bff_claim_idempotency_key; p_key NULL: none). A turn
-- refused after its reservation gets it back here, so nothing is counted for a refusal. `outcome` is
-- admitted, quota (day and seconds_left say until when), rate (ahead is the limiter's) or busy (the
-- key's first request still runs). This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_admit_turn(
    p_user uuid, p_allowed integer, p_default_zone text, p_rate_key text, p_rate integer, p_period double precision,
    p_operation text, p_key text, p_request_hash bytea, p_key_lifetime double precision, p_key_stale double precision)
RETURNS TABLE (outcome text, day date, seconds_left double precision, ahead double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_reserved boolean := true;
    v_day date;
    v_seconds_left double precision;
    v_allowed boolean;
    v_ahead double precision;
BEGIN
    IF p_allowed IS NOT NULL THEN
        SELECT r.reserved, r.day, r.seconds_left INTO v_reserved, v_day, v_seconds_left
        FROM bff_reserve_turn(p_user, p_allowed, p_default_zone) r;
        IF NOT v_reserved THEN
            RETURN QUERY SELECT 'quota'::text, v_day, v_seconds_left, NULL::double precision;
            RETURN;
        END IF;
    END IF;
    SELECT l.allowed, l.ahead INTO v_allowed, v_ahead FROM bff_rate_limit_take(p_rate_key, p_rate, p_period) l;
    IF NOT v_allowed THEN
        IF v_day IS NOT NULL THEN PERFORM bff_give_back_turn(p_user, v_day); END IF;
        RETURN QUERY SELECT 'rate'::text, NULL::date, NULL::double precision, v_ahead;
        RETURN;
    END IF;
    IF p_key IS NOT NULL
       AND NOT bff_claim_idempotency_key(p_user, p_operation, p_key, p_request_hash, p_key_lifetime, p_key_stale) THEN
        IF v_day IS NOT NULL THEN PERFORM bff_give_back_turn(p_user, v_day); END IF;
        RETURN QUERY SELECT 'busy'::text, NULL::date, NULL::double precision, v_ahead;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'admitted'::text, v_day, v_seconds_left, v_ahead;
END
$$;
