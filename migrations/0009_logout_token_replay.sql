-- Back-channel logout tokens already acted on (Back-Channel Logout 1.0 §2.6: "verify that another
-- Logout Token with the same jti value has not been recently received"). A logout token that names
-- only `sub` revokes every session of the user; replayed later it would also end the sessions the
-- user began since. A token is kept until it is too old to be accepted anyway (its iat plus the
-- maximum age), so the maintenance pass keeps this table small.
CREATE TABLE oidc_logout_tokens (
    issuer     text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 2048),
    jti        text        NOT NULL CHECK (length(jti) BETWEEN 1 AND 255),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (issuer, jti)
);

CREATE INDEX oidc_logout_tokens_expires_idx ON oidc_logout_tokens (expires_at);
