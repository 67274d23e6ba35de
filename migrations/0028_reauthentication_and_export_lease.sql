-- Whether a pending login asked the IdP to authenticate the learner again
-- (`/auth/start?reauthenticate=true`, sent as `prompt=login&max_age=0`). With `created_at`, the
-- login's start, the callback decides whether the ID token's `auth_time` shows an authentication
-- made for this login: one missing, or older than the start less a minute of clock skew, is stored
-- as NULL on the session, and NULL never counts as a fresh login (account deletion).
ALTER TABLE oidc_logins ADD COLUMN reauthenticate boolean NOT NULL DEFAULT false;

-- One export at a time per learner (`GET /me/export`), across replicas: a lease taken before the
-- first byte, renewed while the export is written, released at its end; a crashed server's lease
-- runs out. Owned by AccountExport.
CREATE TABLE account_export_leases (
    user_id     uuid        PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    holder      uuid        NOT NULL,
    lease_until timestamptz NOT NULL
);
