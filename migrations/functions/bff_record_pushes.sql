-- The previous release's call for one recall's batch of push answers: a process of that release
-- still running during a rolling upgrade calls it. It records through bff_record_deliveries, whose
-- file holds the rules; drop it in the release after this one. Returns whether this call took the
-- recall to sent.
CREATE OR REPLACE FUNCTION bff_record_pushes(
    p_recall uuid, p_user uuid, p_token_keys text[], p_providers text[], p_outcomes text[], p_retry_after double precision[],
    p_errors text[], p_dead_tokens text[])
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RETURN cardinality(bff_record_deliveries(
        array_fill(p_recall, ARRAY[cardinality(p_token_keys)]), array_fill(p_user, ARRAY[cardinality(p_token_keys)]),
        p_token_keys, p_providers, p_outcomes, p_retry_after, p_errors,
        array_fill(p_user, ARRAY[cardinality(p_dead_tokens)]), p_dead_tokens)) > 0;
END
$$;
