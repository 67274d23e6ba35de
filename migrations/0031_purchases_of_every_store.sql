-- Web and mobile purchases as one plan (issue 34, requirements §7 and §10.3): a subscription
-- bought on the web (RevenueCat Web Billing, Stripe through RevenueCat) or granted as a promotion
-- in RevenueCat is kept beside the App Store's and Google Play's, and unlocks its plan the same way.
--
-- store is RevenueCat's name of where it was bought, and so where the user manages it. platform
-- stays the app's platform of the two app stores and is NULL for every other store, so no row
-- claims a platform it was not bought on. Every row before this one came from an app store: its
-- store follows from its platform.
--
-- A replica of the previous release still running during the rollout writes app-store rows
-- without a store, which NOT NULL refuses: its verifications fail and its re-syncs are retried
-- until a replica of this release runs them (RevenueCat keeps the purchase; nothing is lost). It
-- cannot read a web row this release wrote (it reads platform as text) until it is replaced.
ALTER TABLE iap_receipts
    ADD COLUMN store text NULL,
    -- For a promotional grant, the RevenueCat entitlement it gives (its product is
    -- rc_promo_<entitlement>_<duration>), which BFF_IAP_ENTITLEMENTS maps to a plan; NULL for a purchase.
    ADD COLUMN entitlement_id text NULL CHECK (length(entitlement_id) BETWEEN 1 AND 200),
    ALTER COLUMN platform DROP NOT NULL;

UPDATE iap_receipts SET store = CASE platform WHEN 'ios' THEN 'app_store' WHEN 'android' THEN 'play_store' END;

ALTER TABLE iap_receipts
    ALTER COLUMN store SET NOT NULL,
    ADD CONSTRAINT iap_receipts_store_check
        CHECK (store IN ('app_store', 'play_store', 'stripe', 'rc_billing', 'promotional')),
    -- The platform is the store's: ios for the App Store, android for Google Play, none otherwise.
    ADD CONSTRAINT iap_receipts_platform_of_store_check
        CHECK (platform IS NOT DISTINCT FROM CASE store WHEN 'app_store' THEN 'ios' WHEN 'play_store' THEN 'android' END);
