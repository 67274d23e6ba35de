import BFFPlatform
import BFFWire
import Crypto
import Foundation

/// RevenueCat's canonical state of one customer (`GET /v1/subscribers/{app_user_id}`): the only
/// source the server writes subscriptions from.
struct SubscriberSnapshot: Sendable, Equatable {
    /// One entry of `subscriber.subscriptions` (keyed there by the store's product id).
    struct Subscription: Sendable, Equatable {
        var productID: String
        /// `app_store`, `play_store`, `stripe`, `rc_billing`, `promotional`, … (RevenueCat's `store`).
        var store: String
        var purchaseAt: Date
        var originalPurchaseAt: Date?
        var expiresAt: Date?
        /// `normal`, `trial`, `intro`, `prepaid`.
        var periodType: String?
        var sandbox: Bool
        var unsubscribedAt: Date?
        var billingIssueAt: Date?
        var graceUntil: Date?
        var refundedAt: Date?
        var resumesAt: Date?
        /// Where the user manages it: the entry's own URL, else the subscriber's when it is this
        /// store's (RevenueCat gives one, for the active subscription); nil for a promotional grant.
        /// Set after the entries are read.
        var managementURL: String?
        /// For a promotional grant (store `promotional`, product `rc_promo_<entitlement>_<duration>`),
        /// the entitlement it gives; nil for a purchase.
        var entitlementID: String? = nil
        /// SHA-256 of the entry as RevenueCat sent it (its keys sorted): the `raw_payload_hash` of a
        /// row no receipt wrote.
        var hash: Data

        /// iOS or Android for the two app stores; nil for the others (the web's, a promotional grant).
        var platform: String? { PurchaseStore(rawValue: store)?.platform }

        /// Whether it is active when the snapshot was taken, as RevenueCat's management URL means it:
        /// its status, by the one derivation every stored subscription gets, unlocks its plan.
        func isActive(at date: Date) -> Bool {
            SubscriptionFacts(self).status(at: date).grantsAccess
        }

        /// The store's original transaction id, when the snapshot carries one.
        var originalTransactionID: String?

        /// The row's key: the store's original transaction id, the same for the customer who bought it
        /// and any it is transferred to. RevenueCat's v1 snapshot does not always carry it (its
        /// `store_transaction_id` changes with every renewal); without it the key is the customer's
        /// store and product, whose one entry the snapshot keeps per product, and a transfer is the
        /// row leaving one customer's snapshot and entering the other's.
        func receiptID(of userID: UUID) -> String {
            if let originalTransactionID { return "\(store):\(originalTransactionID)" }
            return "\(store):\(productID):\(userID.uuidString.lowercased())"
        }
    }

    /// When RevenueCat answered (`request_date_ms`): snapshots are applied newest-wins on it.
    var takenAt: Date
    var subscriptions: [Subscription]

    /// Reads RevenueCat's answer; nil when it is no subscriber object (garbage, an HTML error page).
    init?(json data: Data) {
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let subscriber = root["subscriber"] as? [String: Any],
            let takenMillis = Self.number(root["request_date_ms"]) ?? Self.date(root["request_date"]).map({ $0.timeIntervalSince1970 * 1000 })
        else { return nil }
        let takenAt = Date(timeIntervalSince1970: takenMillis / 1000)
        self.takenAt = takenAt
        // Entitlement identifier → the product that gives it (`subscriber.entitlements`).
        var entitlementProducts: [String: String] = [:]
        for (identifier, value) in (subscriber["entitlements"] as? [String: Any]) ?? [:] {
            if let product = (value as? [String: Any])?["product_identifier"] as? String { entitlementProducts[identifier] = product }
        }
        var subscriptions: [Subscription] = []
        var ownURLs: [String: String] = [:]
        for (productID, value) in (subscriber["subscriptions"] as? [String: Any]) ?? [:] {
            guard let entry = value as? [String: Any], !productID.isEmpty, productID.utf8.count <= 255,
                let purchaseAt = Self.date(entry["purchase_date"])
            else { return nil }
            let canonical = (try? JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys])) ?? Data()
            let store = (entry["store"] as? String) ?? "unknown"
            let promotional = store == PurchaseStore.promotional.rawValue
            if let own = entry["management_url"] as? String { ownURLs[productID] = own }
            subscriptions.append(
                Subscription(
                    productID: productID, store: store, purchaseAt: purchaseAt,
                    originalPurchaseAt: Self.date(entry["original_purchase_date"]), expiresAt: Self.date(entry["expires_date"]),
                    periodType: entry["period_type"] as? String, sandbox: (entry["is_sandbox"] as? Bool) ?? false,
                    unsubscribedAt: Self.date(entry["unsubscribe_detected_at"]), billingIssueAt: Self.date(entry["billing_issues_detected_at"]),
                    graceUntil: Self.date(entry["grace_period_expires_date"]), refundedAt: Self.date(entry["refunded_at"]),
                    resumesAt: Self.date(entry["auto_resume_date"]), managementURL: nil,
                    entitlementID: promotional ? Self.promotionalEntitlement(of: productID, entitlementProducts: entitlementProducts) : nil,
                    hash: Data(SHA256.hash(data: Data(productID.utf8) + canonical)),
                    originalTransactionID: (entry["original_transaction_id"] as? String).flatMap { (1...200).contains($0.utf8.count) ? $0 : nil }))
        }
        let managementURL = subscriber["management_url"] as? String
        var managedStore: String?
        if let managementURL { managedStore = Self.store(managedAt: managementURL, among: subscriptions, at: takenAt) }
        for index in subscriptions.indices {
            let subscription = subscriptions[index]
            subscriptions[index].managementURL = ownURLs[subscription.productID] ?? (subscription.store == managedStore ? managementURL : nil)
        }
        self.subscriptions = subscriptions.sorted { $0.productID < $1.productID }
    }

    /// The store whose subscriptions the subscriber's one `management_url` manages. RevenueCat gives
    /// the page of the customer's active subscription: the App Store's or Google Play's (told by its
    /// host), else the web's customer portal (RevenueCat Web Billing's, or Stripe's when one is
    /// configured), which is the store of the web subscription active and bought last (of any
    /// subscription, when there is no web one); never a promotional grant, which has nothing to manage.
    static func store(managedAt url: String, among subscriptions: [Subscription], at date: Date) -> String? {
        switch URL(string: url)?.host?.lowercased() ?? "" {
        case "apps.apple.com": return PurchaseStore.appStore.rawValue
        case "play.google.com": return PurchaseStore.playStore.rawValue
        default: break
        }
        let managed = subscriptions.filter { $0.store != PurchaseStore.promotional.rawValue }
        let web = managed.filter { PurchaseStore(rawValue: $0.store) != nil && $0.platform == nil }
        return (web.isEmpty ? managed : web).max { a, b in
            (a.isActive(at: date) ? 1 : 0, a.purchaseAt, a.productID) < (b.isActive(at: date) ? 1 : 0, b.purchaseAt, b.productID)
        }?.store
    }

    /// RevenueCat's durations of a promotional grant, the last part of its product's id.
    static let promotionalDurations = [
        "daily", "three_day", "weekly", "two_week", "monthly", "two_month", "three_month", "six_month", "yearly", "lifetime",
    ]

    /// The entitlement a promotional grant's product (`rc_promo_<entitlement>_<duration>`) gives: the
    /// one `subscriber.entitlements` names with this product, else the id read without its prefix and
    /// duration (an entitlement names only its latest product); nil when neither tells.
    static func promotionalEntitlement(of productID: String, entitlementProducts: [String: String]) -> String? {
        let named = entitlementProducts.filter { $0.value == productID }.keys.sorted().first
        let parsed: String? = {
            let prefix = "rc_promo_"
            guard productID.hasPrefix(prefix) else { return nil }
            let rest = productID.dropFirst(prefix.count)
            for duration in promotionalDurations where rest.hasSuffix("_" + duration) {
                return String(rest.dropLast(duration.count + 1))
            }
            return nil
        }()
        return (named ?? parsed).flatMap { (1...200).contains($0.utf8.count) ? $0 : nil }
    }

    init(takenAt: Date, subscriptions: [Subscription]) {
        self.takenAt = takenAt
        self.subscriptions = subscriptions
    }

    private static func number(_ value: Any?) -> Double? {
        if let int = value as? Int64 { return Double(int) }
        return value as? Double
    }

    /// RevenueCat's dates: RFC 3339, with or without fractions of a second.
    static func date(_ value: Any?) -> Date? {
        (value as? String).flatMap(RFC3339.date)
    }
}
