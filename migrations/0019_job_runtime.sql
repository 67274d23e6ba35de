-- The job runtime (Sources/BFF/Jobs): PostgreSQL is the queue. A job is one row, enqueued in the
-- transaction of the change that causes it; workers claim rows with FOR UPDATE SKIP LOCKED and hold
-- a lease (locked_until) that another worker takes over when it expires.
CREATE TABLE jobs (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text        NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_.-]{0,63}$'),
    args          jsonb       NOT NULL DEFAULT '{}',
    -- The account the job concerns, if any: deleting the account deletes its jobs.
    user_id       uuid        NULL REFERENCES users (id) ON DELETE CASCADE,
    state         text        NOT NULL DEFAULT 'available'
                              CHECK (state IN ('available', 'running', 'completed', 'dead', 'discarded')),
    attempt       integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts  integer     NOT NULL DEFAULT 10 CHECK (max_attempts BETWEEN 1 AND 100),
    run_at        timestamptz NOT NULL DEFAULT now(),
    locked_by     text        NULL CHECK (length(locked_by) <= 200),
    locked_until  timestamptz NULL,
    last_error    text        NULL CHECK (length(last_error) <= 2000),
    -- Enqueueing work whose key a job of the same kind already holds is a no-op, as long as that job's
    -- row is kept (finished rows are purged after BFF_JOBS_RETENTION).
    unique_key    text        NULL CHECK (length(unique_key) BETWEEN 1 AND 300),
    created_at    timestamptz NOT NULL DEFAULT now(),
    attempted_at  timestamptz NULL,
    finished_at   timestamptz NULL,
    CONSTRAINT jobs_running_is_leased CHECK ((state = 'running') = (locked_until IS NOT NULL)),
    CONSTRAINT jobs_finished_at CHECK ((state IN ('completed', 'dead', 'discarded')) = (finished_at IS NOT NULL))
);

-- The claim: the oldest due jobs of a kind.
CREATE INDEX jobs_available_idx ON jobs (kind, run_at, id) WHERE state = 'available';
-- Leases that ran out (a worker that died).
CREATE INDEX jobs_running_idx ON jobs (locked_until) WHERE state = 'running';
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (kind, unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_user_idx ON jobs (user_id) WHERE user_id IS NOT NULL;
