-- One device, one account: signing in on a device another account holds ends that account's
-- sessions there, recorded as such. NOT VALID: every existing row already satisfies the wider
-- list, and validating would read the whole table while holding the lock every refresh waits
-- for. New rows are checked all the same.
ALTER TABLE refresh_families DROP CONSTRAINT refresh_families_revoked_reason_check;
ALTER TABLE refresh_families ADD CONSTRAINT refresh_families_revoked_reason_check
    CHECK (revoked_reason IN ('logout', 'reuse_detected', 'device_mismatch', 'lost_device',
                              'backchannel_logout', 'operator', 'expired', 'device_taken_over')) NOT VALID;
