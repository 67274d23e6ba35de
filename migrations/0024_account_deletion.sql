-- Account deletion (App Store Review Guideline 5.1.1(v)): every row of the user goes with the users
-- row (each user_id references it ON DELETE CASCADE). What stays is below.

-- One row per deleted account, holding no personal data: SHA-256 of a random salt and the user
-- id, so that the deletion can be confirmed to whoever still knows the id, and to nobody else.
CREATE TABLE account_deletions (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    salt         bytea       NOT NULL CHECK (octet_length(salt) = 16),
    user_hash    bytea       NOT NULL CHECK (octet_length(user_hash) = 32),
    deleted_at   timestamptz NOT NULL DEFAULT now()
);

-- The sessions of deleted accounts, kept as long as their access tokens may run: the revocation
-- poll reads them with the revoked refresh families (which the deletion removed).
CREATE TABLE deleted_sessions (
    family_id  uuid        PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX deleted_sessions_deleted_at_idx ON deleted_sessions (deleted_at);
