-- Achievements (issue 34, requirements M-010): the learner's continuity made visible from what the
-- server already stores (docs/architecture.md, "Achievements"). Three tables of the achievements'
-- own, every row going with its user, and three indexes that make a learner's newest facts a range
-- read instead of a walk over all their rows.

-- A learner's history folded up to `settled_through`, and the last answer (bff_achievements). The
-- fold: the learner messages stamped before that instant and the days they, evaluations and finished
-- recalls fell on, as the streak they leave; a read folds in only the facts stamped since, so its
-- cost follows the newest facts, not the whole history, and the turn writes nothing for it. Facts of
-- a chat deleted after they were folded stay counted: a streak does not break because a chat was
-- tidied away. The answer: what the last computation found, given again while nothing it reads has
-- changed since (`answered_at`), the learner day is the same and the rules are.
CREATE TABLE achievement_progress (
    user_id           uuid        PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    -- Facts stamped before this instant are in the four columns below; later ones are read each time.
    settled_through   timestamptz NOT NULL,
    settled_turns     bigint      NOT NULL DEFAULT 0 CHECK (settled_turns >= 0),
    -- The newest learner day with a fact, the days in a row ending with it, the longest run.
    settled_last_day  date        NULL,
    settled_run       integer     NOT NULL DEFAULT 0 CHECK (settled_run >= 0),
    settled_longest   integer     NOT NULL DEFAULT 0 CHECK (settled_longest >= settled_run),
    -- When the answer was computed, the end of the learner day it was computed for, and the key of
    -- the rules and mastery threshold it was computed with (AchievementRules.key).
    answered_at       timestamptz NOT NULL,
    answered_until    timestamptz NOT NULL,
    answered_rules    text        NOT NULL,
    streak_current    integer     NOT NULL CHECK (streak_current >= 0),
    streak_longest    integer     NOT NULL CHECK (streak_longest >= streak_current),
    today_done        boolean     NOT NULL,
    turns             bigint      NOT NULL CHECK (turns >= 0),
    evaluated_chats   bigint      NOT NULL CHECK (evaluated_chats >= 0),
    recalls_completed bigint      NOT NULL CHECK (recalls_completed >= 0),
    mastered_tags     integer     NOT NULL CHECK (mastered_tags >= 0),
    mastered_subjects integer     NOT NULL CHECK (mastered_subjects >= 0),
    -- Per subject in catalogue order: its id, its tags mastered, its tags.
    subject_ids       text[]      NOT NULL,
    subject_mastered  integer[]   NOT NULL,
    subject_totals    integer[]   NOT NULL,
    -- The learner's trophies as trophy_unlocks held them then, pairwise.
    trophy_codes      text[]      NOT NULL,
    trophy_unlocked_at timestamptz[] NOT NULL,
    CHECK ((settled_last_day IS NULL) = (settled_run = 0))
);

-- Each trophy once per learner, at the moment its rule first held (derived from the facts, not
-- the time of the read that noticed it); the rules are Sources/BFF/Achievements/AchievementRules.swift.
CREATE TABLE trophy_unlocks (
    user_id     uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code        text        NOT NULL CHECK (code ~ '^[a-z][a-z0-9_]{0,63}$'),
    unlocked_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, code)
);

-- The streak's encouragement push, at most one per learner and learner day: the row is the
-- guard, and it keeps which of the learner's tokens (their keys, PushOutcomeStore.tokenKey,
-- never the tokens) took the push, so that a retry pushes only the others.
CREATE TABLE streak_pushes (
    user_id       uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The learner day at whose end the streak would break.
    day           date        NOT NULL,
    -- The streak it encourages to keep (ending the day before).
    streak        integer     NOT NULL CHECK (streak >= 1),
    accepted_keys text[]      NOT NULL DEFAULT '{}',
    -- The first acceptance by a push service; NULL while none accepted it.
    sent_at       timestamptz NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, day)
);

-- The sweep's purge of rows past their use.
CREATE INDEX streak_pushes_day_idx ON streak_pushes (day);

-- A learner's evaluations since an instant (the facts after `settled_through`): a range instead of
-- every evaluation of the learner read from the heap on each read. Written by evaluations only.
CREATE INDEX chat_evaluations_user_updated_idx ON chat_evaluations (user_id, updated_at);

-- A learner's tags changed since an instant (whether the last answer still holds), and the newest
-- mastery of each tag from the index alone. Written by tag extraction, evaluations and chat deletion.
CREATE INDEX chat_tags_user_updated_idx ON chat_tags (user_id, updated_at) INCLUDE (tag_id, mastery);

-- A learner's finished recalls: their count and the n-th one's time (a trophy's moment) are read
-- from the index alone, and those since an instant are a range. Entries are made when a recall is
-- evaluated; `status` was already indexed (recalls_pending_chat_key), so no update loses HOT.
CREATE INDEX recalls_user_done_idx ON recalls (user_id, done_at) WHERE status = 'done';
