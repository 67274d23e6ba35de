-- Mobile tables, exactly as specified in requirements §10.2.
-- Columns may be added later; none of the specified ones may be dropped or renamed.

CREATE TABLE devices (
    device_id    text        PRIMARY KEY CHECK (device_id ~ '^[A-Za-z0-9._:-]{8,128}$'),
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    model        text        NULL CHECK (length(model) <= 200),
    os_version   text        NULL CHECK (length(os_version) <= 100),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX devices_user_idx ON devices (user_id);

CREATE TABLE push_tokens (
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token      text        NOT NULL CHECK (length(token) BETWEEN 1 AND 4096),
    platform   text        NOT NULL CHECK (platform IN ('ios', 'android')),
    -- No FK to devices: registration must not depend on the order the client calls in.
    device_id  text        NOT NULL CHECK (device_id ~ '^[A-Za-z0-9._:-]{8,128}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, token)
);

-- Logout and lost-device handling unregister a device's tokens.
CREATE INDEX push_tokens_device_idx ON push_tokens (device_id);

CREATE TABLE iap_receipts (
    receipt_id       text        PRIMARY KEY CHECK (length(receipt_id) BETWEEN 1 AND 4096),
    user_id          uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    platform         text        NOT NULL CHECK (platform IN ('ios', 'android')),
    product_id       text        NOT NULL CHECK (length(product_id) BETWEEN 1 AND 255),
    status           text        NOT NULL
                                 CHECK (status IN ('trial', 'active', 'grace', 'paused',
                                                   'canceled', 'expired')),
    purchase_at      timestamptz NOT NULL,
    expires_at       timestamptz NULL,
    -- SHA-256 of the store payload: enough to detect a changed receipt without keeping it.
    raw_payload_hash bytea       NOT NULL CHECK (octet_length(raw_payload_hash) = 32),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- A user's current subscription: latest expiry first.
CREATE INDEX iap_receipts_user_expires_idx ON iap_receipts (user_id, expires_at DESC);
