-- A chat's tag mastery as it was before the chat's first self-evaluation. Each evaluation moves
-- mastery from this value, not from the current one, so a second evaluation replaces the first
-- one's effect as it replaces its score, and a retried request (a lost answer on a mobile network)
-- does not move mastery twice. NULL until the chat is first evaluated.
ALTER TABLE chat_tags
    ADD COLUMN mastery_before_evaluation double precision NULL
        CHECK (mastery_before_evaluation BETWEEN 0 AND 1);
