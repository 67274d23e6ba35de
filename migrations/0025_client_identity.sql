-- What the app says about itself in X-Client (its version and platform), kept on the device with
-- the model and OS version the same header gives.
ALTER TABLE devices
    ADD COLUMN app_version text NULL CHECK (length(app_version) <= 20),
    ADD COLUMN platform    text NULL CHECK (platform IN ('ios', 'android'));
