-- bff_rate_limit_take (0006) read the clock before its upsert waited for the key's row. A decision
-- that queued behind concurrent ones on the same key was therefore taken at the moment it arrived,
-- not at the moment it ran: a refusal reported up to that wait more in Retry-After (seen: 120.008 s
-- for a 120 s slot), and an allowance was booked that much earlier than it happened.
--
-- Now the row is locked first and the clock read after: every decision on a key is taken in the
-- order the lock grants them, each at its own time. A key's first use inserts its row (a
-- concurrent first use waits for that insert and then locks the row like any other caller).
-- `tat = '-infinity'` in a new row means "no request yet"; the UPDATE turns it into now + one
-- interval, as the insert did before. Same arguments, same results, same GCRA.
CREATE OR REPLACE FUNCTION bff_rate_limit_take(p_key text, p_rate integer, p_period double precision,
                                               OUT allowed boolean, OUT ahead double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_step interval := make_interval(secs => p_period / p_rate);
    v_burst interval := make_interval(secs => p_period);
BEGIN
    PERFORM 1 FROM rate_limits r WHERE r.key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO rate_limits (key, tat, last_allowed) VALUES (p_key, '-infinity', true)
        ON CONFLICT (key) DO NOTHING;
        PERFORM 1 FROM rate_limits r WHERE r.key = p_key FOR UPDATE;
    END IF;
    v_now := clock_timestamp();
    UPDATE rate_limits AS r SET
        tat = CASE WHEN greatest(r.tat, v_now) + v_step <= v_now + v_burst
                   THEN greatest(r.tat, v_now) + v_step
                   ELSE r.tat END,
        last_allowed = greatest(r.tat, v_now) + v_step <= v_now + v_burst
    WHERE r.key = p_key
    RETURNING r.last_allowed, EXTRACT(EPOCH FROM r.tat - v_now)::float8 INTO allowed, ahead;
END
$$;
