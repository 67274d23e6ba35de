-- BFF-owned identity state: one-time OIDC logins and refresh-token families.

-- One row per pending /auth/start, consumed once by /auth/callback (DELETE ... RETURNING).
CREATE TABLE oidc_logins (
    -- SHA-256 of the state: a database leak does not yield usable states.
    state_hash    bytea       PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    nonce         text        NOT NULL CHECK (length(nonce) BETWEEN 16 AND 255),
    -- PKCE verifier (RFC 7636 §4.1); it never leaves the server.
    code_verifier text        NOT NULL CHECK (code_verifier ~ '^[A-Za-z0-9._~-]{43,128}$'),
    device_id     text        NOT NULL CHECK (device_id ~ '^[A-Za-z0-9._:-]{8,128}$'),
    redirect_uri  text        NOT NULL CHECK (length(redirect_uri) BETWEEN 1 AND 2048),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);

CREATE INDEX oidc_logins_expires_idx ON oidc_logins (expires_at);

-- A family is one login on one device; its id is the AppJWT "sid" claim.
-- Revoking the family invalidates every refresh token ever issued in it.
CREATE TABLE refresh_families (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id        uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_id      text        NOT NULL CHECK (device_id ~ '^[A-Za-z0-9._:-]{8,128}$'),
    created_at     timestamptz NOT NULL DEFAULT now(),
    revoked_at     timestamptz NULL,
    revoked_reason text        NULL
                               CHECK (revoked_reason IN ('logout', 'reuse_detected',
                                                         'device_mismatch', 'lost_device',
                                                         'backchannel_logout', 'operator',
                                                         'expired')),
    -- OIDC session id (ID token "sid"), the key of back-channel logout.
    idp_sid        text        NULL CHECK (length(idp_sid) BETWEEN 1 AND 255),
    CONSTRAINT refresh_families_revoked_check
        CHECK ((revoked_at IS NULL) = (revoked_reason IS NULL))
);

CREATE INDEX refresh_families_user_idx ON refresh_families (user_id);
CREATE INDEX refresh_families_device_idx ON refresh_families (device_id);
-- Partial: most families have no IdP session id; equality lookups still use it.
CREATE INDEX refresh_families_idp_sid_idx ON refresh_families (idp_sid)
    WHERE idp_sid IS NOT NULL;

CREATE TABLE refresh_tokens (
    -- SHA-256 of the token; the token itself is never stored.
    token_hash  bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    family_id   uuid        NOT NULL REFERENCES refresh_families (id) ON DELETE CASCADE,
    -- The token this one replaced (NULL for the first of a family). No FK, so old tokens can
    -- be purged independently.
    parent_hash bytea       NULL CHECK (octet_length(parent_hash) = 32),
    device_id   text        NOT NULL CHECK (device_id ~ '^[A-Za-z0-9._:-]{8,128}$'),
    issued_at   timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    -- Set when rotated; presenting a used token again is reuse (unless within the interval).
    used_at     timestamptz NULL,
    CHECK (expires_at > issued_at)
);

CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);

-- At most one unused token (the head) per family, so two concurrent rotations cannot both
-- succeed. A unique index is not deferrable: mark the old head used before inserting the new.
CREATE UNIQUE INDEX refresh_tokens_family_head_key ON refresh_tokens (family_id)
    WHERE used_at IS NULL;
