-- Spaced re-recalls (M-004, UC-002): one row per recall of a chat. At most one is pending per
-- chat; evaluating it schedules the next. `target_at` is when spaced repetition wants it,
-- `due_at` that time placed inside the learner's notification window (re-placed when the window
-- changes).
CREATE TABLE recalls (
    id               uuid             PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id          uuid             NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chat_id          uuid             NOT NULL,
    status           text             NOT NULL DEFAULT 'scheduled'
                                      CHECK (status IN ('scheduled', 'sent', 'opened', 'done', 'canceled')),
    -- Successful recalls in a row before this one; its interval grew with each.
    step             integer          NOT NULL DEFAULT 0 CHECK (step BETWEEN 0 AND 1000),
    interval_seconds double precision NOT NULL CHECK (interval_seconds > 0),
    target_at        timestamptz      NOT NULL,
    due_at           timestamptz      NOT NULL,
    sent_at          timestamptz      NULL,
    opened_at        timestamptz      NULL,
    done_at          timestamptz      NULL,
    score            smallint         NULL CHECK (score BETWEEN 1 AND 5),
    note             text             NULL CHECK (length(note) <= 4000),
    created_at       timestamptz      NOT NULL DEFAULT now(),
    updated_at       timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT recalls_chat_fkey FOREIGN KEY (chat_id, user_id) REFERENCES chats (id, user_id) ON DELETE CASCADE,
    CONSTRAINT recalls_done_is_scored CHECK ((status = 'done') = (score IS NOT NULL))
);

CREATE UNIQUE INDEX recalls_pending_chat_key ON recalls (chat_id) WHERE status IN ('scheduled', 'sent', 'opened');
-- The list: the learner's recalls, soonest first.
CREATE INDEX recalls_user_due_idx ON recalls (user_id, due_at, id);
