-- User-wide revocations for the web's session cookie (docs/web-session.md). An AppJWT belongs to a
-- refresh family, which a revocation marks; the web's Auth.js cookie belongs to none. So an
-- operator's revocation of a user (`bff auth revoke --user`) and an account deletion also record the
-- user's IdP identity here, with the time: a cookie issued (`iat`) before it is refused, by every
-- replica's revocation poll and by the sign-up a cookie makes on first sight.
--
-- Keyed by SHA-256 of issuer, a line feed and subject, not by the user id: a deletion removes the
-- user, and the cookie names the IdP identity, which would otherwise make the account again; the
-- hash keeps the subject of a deleted account unreadable. A row is purged 31 days after its
-- revocation (maintenance.purge): no cookie is accepted 30 days after its `iat`.
CREATE TABLE revoked_identities (
    identity_hash bytea       PRIMARY KEY CHECK (octet_length(identity_hash) = 32),
    revoked_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX revoked_identities_revoked_at_idx ON revoked_identities (revoked_at);
