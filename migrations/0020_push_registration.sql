-- Push token registration (API-040): a token has one owner and a device one token, so a token
-- registered again by another account moves to it, and a device's new token replaces its old one.
-- Rows that broke either rule before are reduced to the newest.
DELETE FROM push_tokens p USING push_tokens q
WHERE p.token = q.token AND (p.updated_at, p.user_id) < (q.updated_at, q.user_id);
DELETE FROM push_tokens p USING push_tokens q
WHERE p.device_id = q.device_id AND (p.updated_at, p.token) < (q.updated_at, q.token);

-- Which service issued the token, so that delivery picks its sender.
ALTER TABLE push_tokens ADD COLUMN provider text NOT NULL DEFAULT 'fcm' CHECK (provider IN ('apns', 'fcm'));
UPDATE push_tokens SET provider = 'apns' WHERE platform = 'ios' AND token ~ '^[0-9A-Fa-f]{64,200}$';

CREATE UNIQUE INDEX push_tokens_token_key ON push_tokens (token);
CREATE UNIQUE INDEX push_tokens_device_key ON push_tokens (device_id);
DROP INDEX push_tokens_device_idx;
-- The cap of ten devices with tokens per user drops the least recently seen.
CREATE INDEX push_tokens_user_seen_idx ON push_tokens (user_id, updated_at);

-- Off: recalls are still scheduled and listed, but never pushed.
ALTER TABLE user_settings ADD COLUMN notifications_enabled boolean NOT NULL DEFAULT true;
