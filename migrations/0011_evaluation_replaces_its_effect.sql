-- A chat's tag mastery as it was before the chat's first self-evaluation. Each evaluation moves
-- mastery from this value, not from the current one, so a second evaluation replaces the first
-- one's effect as it replaces its score, and a retried request (a lost answer on a mobile network)
-- does not move mastery twice. NULL while the chat has not been evaluated.
--
-- The ALTER locks chat_tags; waiting longer than 5 s for that lock fails the migration (run it
-- again) rather than queueing every reader behind it.
SET LOCAL lock_timeout = '5s';

ALTER TABLE chat_tags
    ADD COLUMN mastery_before_evaluation double precision NULL
        CHECK (mastery_before_evaluation BETWEEN 0 AND 1);

-- Chats evaluated before this migration: their last evaluation moved mastery halfway from the
-- baseline towards (score - 1) / 4, so the baseline is 2 * mastery - (score - 1) / 4. That is exact
-- for a chat evaluated once; for one rated again before, it is the state before the last rating.
UPDATE chat_tags ct
SET mastery_before_evaluation = least(1, greatest(0, 2 * ct.mastery - (e.score - 1) / 4.0))
FROM chat_evaluations e
WHERE e.chat_id = ct.chat_id AND e.user_id = ct.user_id;
