-- Every replica reads the families revoked within the last access-token lifetime, every few seconds
-- (RevocationWatcher), so that a revoked session's access tokens are refused before they expire.
-- Partial: most families are never revoked, and only revoked ones are read by time.
--
-- Building the index locks refresh_families against writes (logins, logouts) until the build ends, a
-- matter of seconds for millions of rows: on a large table, migrate in a quiet hour. Waiting
-- longer than 5 s for that lock fails the migration (run it again) rather than queueing every
-- writer behind it.
SET LOCAL lock_timeout = '5s';

CREATE INDEX refresh_families_revoked_at_idx ON refresh_families (revoked_at)
    WHERE revoked_at IS NOT NULL;
