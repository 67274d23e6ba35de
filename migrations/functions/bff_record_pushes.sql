-- Records a batch of a recall's push answers in one statement (Recall/PushOutcomeStore.swift): the
-- outcome per token key (parallel arrays; a token answered again counts one more attempt), the
-- tokens the services called dead deleted from the learner's registrations, and the recall taken
-- to `sent` when any push was accepted while it was still `scheduled`. Returns whether this call
-- took it to sent: the caller measures the delivery delay only then, once per recall.
-- p_retry_after: seconds the service asked to wait, negative when it did not say; p_errors: the
-- service's answer, empty for an acceptance. Every statement names p_user. This file is its one
-- full text (README, "Stored functions").
CREATE OR REPLACE FUNCTION bff_record_pushes(
    p_recall uuid, p_user uuid, p_token_keys text[], p_providers text[], p_outcomes text[], p_retry_after double precision[],
    p_errors text[], p_dead_tokens text[])
RETURNS boolean
-- plpgsql, not sql: a sql function with data-modifying steps is planned again on every call, which
-- cost 1.26 ms a recall at the 08:00 burst (pg_stat_statements, scripts/bench push); plpgsql keeps
-- the statements' plans for the session, and skips the steps a batch does not need. Still one
-- round trip for the caller.
LANGUAGE plpgsql AS $$
DECLARE
    took_to_sent boolean := false;
BEGIN
    INSERT INTO recall_pushes AS o (recall_id, user_id, token_key, provider, outcome, retry_at, error)
    SELECT p_recall, p_user, k, p, oc,
           CASE WHEN ra >= 0 THEN now() + ra * interval '1 second' END,
           left(nullif(e, ''), 500)
    FROM unnest(p_token_keys, p_providers, p_outcomes, p_retry_after, p_errors) AS t(k, p, oc, ra, e)
    ON CONFLICT (recall_id, token_key) DO UPDATE
        SET provider = excluded.provider, outcome = excluded.outcome, attempts = o.attempts + 1,
            retry_at = excluded.retry_at, error = excluded.error, updated_at = now()
    WHERE o.user_id = p_user;
    -- Most batches have no dead token, and most recalls are already sent when a later batch lands.
    IF cardinality(p_dead_tokens) > 0 THEN
        DELETE FROM push_tokens WHERE user_id = p_user AND token = ANY (p_dead_tokens);
    END IF;
    IF 'accepted' = ANY (p_outcomes) THEN
        UPDATE recalls SET status = 'sent', sent_at = now(), updated_at = now()
        WHERE id = p_recall AND user_id = p_user AND status = 'scheduled'
        RETURNING true INTO took_to_sent;
    END IF;
    RETURN coalesce(took_to_sent, false);
END
$$;
