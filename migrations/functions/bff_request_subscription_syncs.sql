-- Asks for RevenueCat re-syncs of p_users, coalesced to one job per user and window of
-- p_window_seconds (SubscriptionSync.swift): a user without this window's job gets it now; while
-- that job still waits it covers the request (it reads RevenueCat later); once it has started, the
-- next window's job is asked for, to run when that window opens. Existing jobs are left as they
-- are. Queues through bff_enqueue_jobs, which wakes the workers when it queued any; returns how many it queued. The webhook calls it
-- within its one statement, verification and the expiry job on their own. This file is its one
-- full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_request_subscription_syncs(
    p_users uuid[], p_reason text, p_window bigint, p_window_seconds double precision, p_kind text, p_channel text)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_queued integer;
BEGIN
    SELECT bff_enqueue_jobs(
        p_kind,
        array_agg(jsonb_build_object('user_id', u, 'reason', p_reason)),
        array_agg(u),
        array_agg('sync:' || u::text || ':' || (CASE WHEN state IS NULL THEN p_window ELSE p_window + 1 END)::text),
        array_agg(CASE WHEN state IS NULL THEN now() ELSE to_timestamp((p_window + 1) * p_window_seconds) END),
        10, p_channel)
    INTO v_queued
    FROM (
        SELECT p.u, j.state FROM unnest(p_users) AS p(u)
        LEFT JOIN jobs j ON j.kind = p_kind AND j.unique_key = 'sync:' || p.u::text || ':' || p_window::text
    ) wanted
    WHERE state IS DISTINCT FROM 'available';
    RETURN coalesce(v_queued, 0);
END
$$;
