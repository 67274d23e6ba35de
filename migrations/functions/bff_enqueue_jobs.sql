-- The job runtime's one way into `jobs` (Sources/BFF/Jobs/JobQueue.swift): one INSERT of a batch of
-- jobs of one kind, each with its arguments, user, unique key and due time (NULL: now), and one
-- NOTIFY of the kind on p_channel when any was queued (delivered at commit, with the caller's
-- transaction). A unique key a job of the kind already holds makes that job a no-op. Returns how
-- many it queued. JobQueue calls it, and so do the stored functions and statements that ask for
-- jobs (bff_request_subscription_syncs, the nightly reconcile): nothing else inserts into `jobs`.
-- This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_enqueue_jobs(
    p_kind text, p_args jsonb[], p_users uuid[], p_unique_keys text[], p_run_at timestamptz[], p_max_attempts integer,
    p_channel text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_queued integer;
BEGIN
    WITH queued AS (
        INSERT INTO jobs (kind, args, user_id, unique_key, run_at, max_attempts)
        SELECT p_kind, a, u, k, coalesce(r, now()), p_max_attempts
        FROM unnest(p_args, p_users, p_unique_keys, p_run_at) AS t(a, u, k, r)
        ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
        RETURNING 1
    )
    SELECT count(*) INTO v_queued FROM queued;
    IF v_queued > 0 THEN
        PERFORM pg_notify(p_channel, p_kind);
    END IF;
    RETURN v_queued;
END
$$;
