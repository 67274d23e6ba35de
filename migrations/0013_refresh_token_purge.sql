-- The maintenance pass deletes refresh tokens a week after they expire, and a family once all of
-- its tokens are that old (IdentityRepository.purgeSpentSessions). Until now nothing did: every
-- rotation adds a row, so refresh_tokens grew by a row per active learner every 15 minutes,
-- for good. This index lets each batch find the expired tokens without reading the table.
--
-- Building the index locks refresh_tokens against writes (rotations) until the build ends, a
-- matter of seconds for millions of rows: on a large table, migrate in a quiet hour. Waiting
-- longer than 5 s for that lock fails the migration (run it again) rather than queueing every
-- writer behind it.
SET LOCAL lock_timeout = '5s';

CREATE INDEX refresh_tokens_expires_idx ON refresh_tokens (expires_at);
