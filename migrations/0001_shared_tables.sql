-- Tables shared with the web product (requirements §10.1).
-- gen_random_uuid() is built into PostgreSQL 13+, so no extension is needed.

CREATE TABLE users (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    issuer       text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 2048),
    subject      text        NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    email        text        NULL CHECK (length(email) BETWEEN 1 AND 320),
    display_name text        NULL CHECK (length(display_name) BETWEEN 1 AND 200),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- An OIDC identity is (iss, sub); sub alone is only unique per issuer.
    CONSTRAINT users_issuer_subject_key UNIQUE (issuer, subject)
);

CREATE TABLE subjects (
    id       text    PRIMARY KEY CHECK (id ~ '^[a-z0-9_.-]+$' AND length(id) <= 64),
    name     text    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position integer NOT NULL DEFAULT 0
);

CREATE TABLE topics (
    id         text    PRIMARY KEY CHECK (id ~ '^[a-z0-9_.-]+$' AND length(id) <= 128),
    subject_id text    NOT NULL REFERENCES subjects (id),
    name       text    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position   integer NOT NULL DEFAULT 0,
    -- Target of chats' composite FK, which keeps a chat's topic inside its subject.
    CONSTRAINT topics_subject_id_id_key UNIQUE (subject_id, id)
);

CREATE INDEX topics_subject_position_idx ON topics (subject_id, position);

CREATE TABLE tags (
    id    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    code  text NOT NULL UNIQUE CHECK (code ~ '^[a-z0-9_.-]+$' AND length(code) <= 128),
    label text NOT NULL CHECK (length(label) BETWEEN 1 AND 200)
);

CREATE TABLE chats (
    id                   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id              uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    title                text        NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    subject_id           text        NULL REFERENCES subjects (id),
    topic_id             text        NULL REFERENCES topics (id),
    status               text        NOT NULL DEFAULT 'in_progress'
                                     CHECK (status IN ('in_progress', 'ended')),
    message_count        integer     NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    last_message_preview text        NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    -- Soft delete: the row stays as a tombstone so delta sync (updated_since) can report it.
    deleted_at           timestamptz NULL,
    -- Target of the composite FKs of messages, chat_tags and chat_evaluations: it makes their
    -- denormalised user_id provably equal to the chat owner's.
    CONSTRAINT chats_id_user_id_key UNIQUE (id, user_id),
    -- MATCH SIMPLE: only checked when both are set; then the topic must belong to the subject.
    CONSTRAINT chats_subject_topic_fkey FOREIGN KEY (subject_id, topic_id)
        REFERENCES topics (subject_id, id)
);

-- List (newest first, keyset on (updated_at, id)); tombstones are excluded, hence partial.
CREATE INDEX chats_user_list_idx ON chats (user_id, updated_at DESC, id DESC)
    WHERE deleted_at IS NULL;
-- Delta pull (updated_since): must include tombstones, so not partial.
CREATE INDEX chats_user_delta_idx ON chats (user_id, updated_at, id);

CREATE TABLE messages (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    chat_id    uuid        NOT NULL,
    -- Denormalised so that every query can filter by the authenticated user.
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       text        NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT messages_chat_fkey FOREIGN KEY (chat_id, user_id)
        REFERENCES chats (id, user_id) ON DELETE CASCADE
);

-- History, oldest first, keyset on (created_at, id).
CREATE INDEX messages_chat_created_idx ON messages (chat_id, created_at, id);
-- Without it, deleting a user seq-scans messages for the users FK cascade.
CREATE INDEX messages_user_idx ON messages (user_id);

CREATE TABLE chat_tags (
    chat_id    uuid             NOT NULL,
    tag_id     uuid             NOT NULL REFERENCES tags (id),
    user_id    uuid             NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    mastery    double precision NOT NULL DEFAULT 0 CHECK (mastery BETWEEN 0 AND 1),
    updated_at timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, tag_id),
    CONSTRAINT chat_tags_chat_fkey FOREIGN KEY (chat_id, user_id)
        REFERENCES chats (id, user_id) ON DELETE CASCADE
);

CREATE INDEX chat_tags_user_tag_idx ON chat_tags (user_id, tag_id);

CREATE TABLE user_settings (
    user_id      uuid        PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    difficulty   smallint    NOT NULL CHECK (difficulty BETWEEN 1 AND 5),
    -- No start < end check: a quiet window may wrap midnight (e.g. 21:00–07:00).
    notify_start time        NOT NULL,
    notify_end   time        NOT NULL,
    -- IANA name; validated by the application (a CHECK cannot consult pg_timezone_names).
    timezone     text        NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
    theme        text        NOT NULL CHECK (theme IN ('light', 'dark', 'system')),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_subject_prefs (
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject_id text        NOT NULL REFERENCES subjects (id),
    -- An array cannot carry a FK; the application checks the ids against topics.
    topic_ids  text[]      NOT NULL DEFAULT '{}'
                           CHECK (array_position(topic_ids, NULL) IS NULL),
    difficulty smallint    NOT NULL CHECK (difficulty BETWEEN 1 AND 5),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, subject_id)
);

CREATE TABLE chat_evaluations (
    chat_id    uuid        PRIMARY KEY,
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    score      smallint    NOT NULL CHECK (score BETWEEN 1 AND 5),
    note       text        NULL CHECK (length(note) <= 1000),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chat_evaluations_chat_fkey FOREIGN KEY (chat_id, user_id)
        REFERENCES chats (id, user_id) ON DELETE CASCADE
);

CREATE INDEX chat_evaluations_user_idx ON chat_evaluations (user_id);
