-- What each of a recall's pushes came to, one row per recall and device token
-- (docs/architecture.md, "Recall delivery"). A recall's delivery is one job that fans out to every
-- token; this table is how a run again (a retry, a worker killed mid-way, `bff jobs retry`) knows
-- which tokens were accepted already and pushes only the others. Written only by
-- bff_record_pushes, one statement per batch of answers; rows go with their recall.
--
-- The token is kept only as its key (the first 16 bytes of its SHA-256, in hex): a token is a
-- credential to push to the learner's phone, and this row outlives its registration.
CREATE TABLE recall_pushes (
    recall_id  uuid        NOT NULL REFERENCES recalls (id) ON DELETE CASCADE,
    -- No foreign key to users: the recall's own cascades from users, and each key checked is a
    -- lookup and a row lock in the 08:00 burst's one statement per recall.
    user_id    uuid        NOT NULL,
    token_key  text        NOT NULL CHECK (token_key ~ '^[0-9a-f]{32}$'),
    provider   text        NOT NULL CHECK (provider IN ('apns', 'fcm')),
    outcome    text        NOT NULL CHECK (outcome IN ('accepted', 'dead', 'retry', 'error')),
    -- Answers recorded for this token and recall, the first included.
    attempts   integer     NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    -- A retry's earliest next attempt, when the service said (Retry-After).
    retry_at   timestamptz NULL,
    -- What the service answered, for anything but an acceptance.
    error      text        NULL CHECK (length(error) <= 500),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (recall_id, token_key)
);
