-- Subscriptions through RevenueCat (M-008, API-050, JOB-003, requirements §10.2 and §10.3).
--
-- iap_receipts keeps one row per store subscription, written only from RevenueCat's canonical
-- subscriber snapshot (GET /subscribers), never from a webhook's body. Besides the status as of
-- its last write, a row keeps the facts the status is derived from, so a reader can derive it
-- again at any later instant.
ALTER TABLE iap_receipts
    ADD COLUMN will_renew       boolean     NOT NULL DEFAULT false,
    ADD COLUMN period_type      text        NULL CHECK (length(period_type) <= 32),
    ADD COLUMN unsubscribed_at  timestamptz NULL,
    ADD COLUMN billing_issue_at timestamptz NULL,
    ADD COLUMN grace_until      timestamptz NULL,
    ADD COLUMN refunded_at      timestamptz NULL,
    ADD COLUMN resumes_at       timestamptz NULL,
    ADD COLUMN sandbox          boolean     NOT NULL DEFAULT false,
    ADD COLUMN management_url   text        NULL CHECK (length(management_url) <= 2000),
    -- RevenueCat's request_date of the snapshot the row was written from: an older snapshot,
    -- arriving late, never overwrites a newer one (webhooks come in any order).
    ADD COLUMN snapshot_at      timestamptz NOT NULL DEFAULT '-infinity';

CREATE INDEX iap_receipts_live_idx ON iap_receipts (user_id) WHERE status <> 'expired';

-- The plan a user's subscriptions grant, derived from their rows in the transaction that writes
-- them: what /me shows and every plan limit reads, on the web and every device alike.
CREATE TABLE entitlements (
    user_id      uuid        PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    plan         text        NOT NULL CHECK (plan IN ('free', 'basic', 'pro')),
    status       text        NULL
                             CHECK (status IN ('trial', 'active', 'grace', 'paused', 'canceled', 'expired')),
    -- NULL with a paid plan: a subscription without an end.
    access_until timestamptz NULL,
    will_renew   boolean     NOT NULL DEFAULT false,
    -- The newest snapshot applied ('-infinity' before the first).
    snapshot_at  timestamptz NOT NULL,
    synced_at    timestamptz NOT NULL DEFAULT now()
);

-- The expiry job's question: whose access ends soon or has just ended.
CREATE INDEX entitlements_access_until_idx ON entitlements (access_until) WHERE plan <> 'free';

-- RevenueCat's webhook inbox, keyed by the event id (RevenueCat repeats an id when it retries).
-- It keeps what the event names, not its body: the ids of the users it concerns, to re-sync them.
CREATE TABLE revenuecat_events (
    event_id      text        PRIMARY KEY CHECK (length(event_id) BETWEEN 1 AND 200),
    type          text        NOT NULL CHECK (length(type) BETWEEN 1 AND 100),
    environment   text        NULL CHECK (length(environment) <= 32),
    -- Every RevenueCat id the event names (app_user_id, original ids, aliases, both sides of a
    -- transfer), as sent.
    app_user_ids  text[]      NOT NULL,
    -- The users among them whose re-sync has not yet run since the event came.
    pending_users uuid[]      NOT NULL,
    event_at      timestamptz NULL,
    -- SHA-256 of the body as received.
    body_hash     bytea       NOT NULL CHECK (octet_length(body_hash) = 32),
    received_at   timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz NULL,
    CHECK ((processed_at IS NULL) = (cardinality(pending_users) > 0))
);

CREATE INDEX revenuecat_events_pending_idx ON revenuecat_events USING gin (pending_users) WHERE processed_at IS NULL;
CREATE INDEX revenuecat_events_processed_idx ON revenuecat_events (processed_at) WHERE processed_at IS NOT NULL;

-- Tutoring turns per user and local day (the learner's time zone), for the plans' daily quotas.
CREATE TABLE plan_usage (
    user_id uuid    NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    day     date    NOT NULL,
    turns   integer NOT NULL DEFAULT 0 CHECK (turns >= 0),
    PRIMARY KEY (user_id, day)
);
