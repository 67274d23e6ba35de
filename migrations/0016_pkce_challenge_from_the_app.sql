-- PKCE end to end: the app makes the verifier and keeps it; a login holds only its S256 challenge
-- (RFC 7636 §4.2) and the callback checks the verifier the app presents against it. Holding the
-- verifier here let whoever intercepted the redirect (another app registered for the same custom
-- scheme, RFC 8252 §8.1) redeem the code.
-- Pending logins of the old flow hold a verifier no app knows and can no longer complete: they are
-- deleted (a login lives 10 minutes; the app starts again). A replica of the previous release still
-- running during the deploy can no longer create logins, which is intended: its flow is the hole.
DELETE FROM oidc_logins;
ALTER TABLE oidc_logins DROP COLUMN code_verifier;
ALTER TABLE oidc_logins ADD COLUMN code_challenge text NOT NULL
    CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$');
