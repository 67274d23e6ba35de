-- Re-syncs from RevenueCat, at most one per user per 10 seconds across every process: each claims
-- the user's entitlement row first (sync_started_at). synced_at now means "RevenueCat was asked at",
-- '-infinity' until the first time, and tells the expiry job which webhook events a re-sync covered;
-- the inbox is no longer touched by every re-sync, so its GIN index over pending users goes.
ALTER TABLE entitlements
    ADD COLUMN sync_started_at timestamptz NULL,
    ALTER COLUMN synced_at SET DEFAULT '-infinity';

DROP INDEX revenuecat_events_pending_idx;
CREATE INDEX revenuecat_events_unprocessed_idx ON revenuecat_events (received_at) WHERE processed_at IS NULL;
