-- The tutoring turn (POST /api/v1/chat): each reply records the model and the tokens it cost, for
-- cost accounting per turn. Learners' own messages and older rows leave them NULL.
ALTER TABLE messages
    ADD COLUMN model             text    NULL CHECK (length(model) <= 200),
    ADD COLUMN prompt_tokens     integer NULL CHECK (prompt_tokens >= 0),
    ADD COLUMN completion_tokens integer NULL CHECK (completion_tokens >= 0);
