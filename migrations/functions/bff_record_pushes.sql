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
LANGUAGE sql AS $$
    WITH recorded AS (
        INSERT INTO recall_pushes AS o (recall_id, user_id, token_key, provider, outcome, retry_at, error)
        SELECT p_recall, p_user, k, p, oc,
               CASE WHEN ra >= 0 THEN now() + ra * interval '1 second' END,
               left(nullif(e, ''), 500)
        FROM unnest(p_token_keys, p_providers, p_outcomes, p_retry_after, p_errors) AS t(k, p, oc, ra, e)
        ON CONFLICT (recall_id, token_key) DO UPDATE
            SET provider = excluded.provider, outcome = excluded.outcome, attempts = o.attempts + 1,
                retry_at = excluded.retry_at, error = excluded.error, updated_at = now()
        WHERE o.user_id = p_user
        RETURNING o.outcome
    ),
    dead AS (
        DELETE FROM push_tokens WHERE user_id = p_user AND token = ANY (p_dead_tokens)
    ),
    sent AS (
        UPDATE recalls SET status = 'sent', sent_at = now(), updated_at = now()
        WHERE id = p_recall AND user_id = p_user AND status = 'scheduled'
          AND EXISTS (SELECT 1 FROM recorded WHERE outcome = 'accepted')
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM sent)
$$;
