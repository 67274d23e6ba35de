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
        /// `app_store`, `play_store`, `stripe`, `promotional`, …
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
        var managementURL: String?
        /// SHA-256 of the entry as RevenueCat sent it (its keys sorted): the `raw_payload_hash` of a
        /// row no receipt wrote.
        var hash: Data

        /// iOS or Android; nil for the stores these requirements leave out (the web's own, promotions).
        var platform: String? {
            switch store {
            case "app_store": "ios"
            case "play_store": "android"
            default: nil
            }
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
        takenAt = Date(timeIntervalSince1970: takenMillis / 1000)
        let managementURL = subscriber["management_url"] as? String
        var subscriptions: [Subscription] = []
        for (productID, value) in (subscriber["subscriptions"] as? [String: Any]) ?? [:] {
            guard let entry = value as? [String: Any], !productID.isEmpty, productID.utf8.count <= 255,
                let purchaseAt = Self.date(entry["purchase_date"])
            else { return nil }
            let canonical = (try? JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys])) ?? Data()
            subscriptions.append(
                Subscription(
                    productID: productID, store: (entry["store"] as? String) ?? "unknown", purchaseAt: purchaseAt,
                    originalPurchaseAt: Self.date(entry["original_purchase_date"]), expiresAt: Self.date(entry["expires_date"]),
                    periodType: entry["period_type"] as? String, sandbox: (entry["is_sandbox"] as? Bool) ?? false,
                    unsubscribedAt: Self.date(entry["unsubscribe_detected_at"]), billingIssueAt: Self.date(entry["billing_issues_detected_at"]),
                    graceUntil: Self.date(entry["grace_period_expires_date"]), refundedAt: Self.date(entry["refunded_at"]),
                    resumesAt: Self.date(entry["auto_resume_date"]),
                    managementURL: (entry["management_url"] as? String) ?? managementURL,
                    hash: Data(SHA256.hash(data: Data(productID.utf8) + canonical)),
                    originalTransactionID: (entry["original_transaction_id"] as? String).flatMap { (1...200).contains($0.utf8.count) ? $0 : nil }))
        }
        self.subscriptions = subscriptions.sorted { $0.productID < $1.productID }
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
