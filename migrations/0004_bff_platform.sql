-- BFF-owned platform state: rate limiting and idempotency.

-- UNLOGGED: the state is disposable (losing it after a crash only resets the limits), and
-- skipping WAL matters for a row written on every limited request.
CREATE UNLOGGED TABLE rate_limits (
    key text        PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 512),
    -- GCRA "theoretical arrival time": when the key's allowance is fully restored. A request
    -- would set tat' = max(tat, now) + emission_interval; it is allowed (and stored) when
    -- tat' - now <= the burst window, else refused with Retry-After = tat' - now - window.
    -- A row whose tat is in the past carries no state and can be purged.
    tat timestamptz NOT NULL,
    -- The outcome of the latest request, returned by the same upsert that decides it, so the
    -- caller learns both the decision and the current tat in one atomic statement.
    last_allowed boolean NOT NULL DEFAULT true
);

CREATE INDEX rate_limits_tat_idx ON rate_limits (tat);

CREATE TABLE idempotency_keys (
    user_id       uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key           text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    operation     text        NOT NULL CHECK (length(operation) BETWEEN 1 AND 100),
    -- SHA-256 of the request: the same key with a different request is a conflict.
    request_hash  bytea       NOT NULL CHECK (octet_length(request_hash) = 32),
    -- NULL while the first request is still in flight.
    status_code   integer     NULL CHECK (status_code BETWEEN 100 AND 599),
    response_body bytea       NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, operation, key),
    CHECK (response_body IS NULL OR status_code IS NOT NULL)
);

-- Keys are purged 24 h after creation.
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
