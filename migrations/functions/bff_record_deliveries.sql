-- Records the push answers of many recalls' deliveries in one statement (Recall/PushOutcomeStore.swift,
-- which gathers the deliveries running at once into one call): the outcome per recall and token key
-- (parallel arrays, a row each; a token answered again counts one more attempt), the tokens the
-- services called dead deleted from their learners' registrations, and each recall that had a push
-- accepted while it was still `scheduled` taken to `sent`. Returns the recalls this call took to
-- sent: the caller measures the delivery delay only then, once per recall.
-- p_retry_after: seconds the service asked to wait, negative when it did not say; p_errors: the
-- service's answer, empty for an acceptance. Every row names its learner, and every statement
-- matches it. This file is its one full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_record_deliveries(
    p_recalls uuid[], p_users uuid[], p_token_keys text[], p_providers text[], p_outcomes text[],
    p_retry_after double precision[], p_errors text[], p_dead_users uuid[], p_dead_tokens text[])
RETURNS uuid[]
-- plpgsql, not sql: a sql function with data-modifying steps is planned again on every call, which
-- cost 1.26 ms a recall at the 08:00 burst (pg_stat_statements, scripts/bench push); plpgsql keeps
-- the statements' plans for the session, and skips the steps a batch does not need.
LANGUAGE plpgsql AS $$
DECLARE
    v_sent uuid[];
BEGIN
    INSERT INTO recall_pushes AS o (recall_id, user_id, token_key, provider, outcome, retry_at, error)
    -- One row per recall and token: a statement may not write a row twice.
    SELECT DISTINCT ON (r, k) r, u, k, p, oc,
           CASE WHEN ra >= 0 THEN now() + ra * interval '1 second' END,
           left(nullif(e, ''), 500)
    FROM unnest(p_recalls, p_users, p_token_keys, p_providers, p_outcomes, p_retry_after, p_errors) AS t(r, u, k, p, oc, ra, e)
    ORDER BY r, k
    ON CONFLICT (recall_id, token_key) DO UPDATE
        SET provider = excluded.provider, outcome = excluded.outcome, attempts = o.attempts + 1,
            retry_at = excluded.retry_at, error = excluded.error, updated_at = now()
    WHERE o.user_id = excluded.user_id;
    -- Most batches have no dead token. Locked in one order first: two processes' batches may name
    -- the same learner's tokens.
    IF cardinality(p_dead_tokens) > 0 THEN
        PERFORM 1 FROM push_tokens
        WHERE (user_id, token) IN (SELECT * FROM unnest(p_dead_users, p_dead_tokens))
        ORDER BY user_id, token FOR UPDATE;
        DELETE FROM push_tokens
        WHERE (user_id, token) IN (SELECT * FROM unnest(p_dead_users, p_dead_tokens));
    END IF;
    IF 'accepted' = ANY (p_outcomes) THEN
        WITH sent AS (
            UPDATE recalls AS rc SET status = 'sent', sent_at = now(), updated_at = now()
            FROM (SELECT DISTINCT a.r, a.u FROM unnest(p_recalls, p_users, p_outcomes) AS a(r, u, oc) WHERE a.oc = 'accepted') AS a
            WHERE rc.id = a.r AND rc.user_id = a.u AND rc.status = 'scheduled'
            RETURNING rc.id
        )
        SELECT array_agg(id) INTO v_sent FROM sent;
    END IF;
    RETURN coalesce(v_sent, '{}'::uuid[]);
END
$$;
