import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// A user's subscriptions and entitlement in PostgreSQL: written only from RevenueCat snapshots,
/// newest wins, and read by `/me`, `/me/subscription` and every plan limit.
struct SubscriptionStore: Sendable {
    let database: Database
    let configuration: SubscriptionConfiguration
    let logger: Logger

    /// A subscription as the user sees it: the stored facts, its status derived at the time read.
    struct Row: Sendable, Equatable {
        var facts: SubscriptionFacts
        var status: SubscriptionStatus
        var willRenew: Bool
    }

    /// What `/me/subscription` answers.
    struct View: Sendable, Equatable {
        var entitlement: Entitlement
        var subscriptions: [Row]
        /// The subscription that unlocks the plan.
        var granting: Row?
    }

    /// The receipt a verification handed RevenueCat: its row keeps the receipt's hash, not the snapshot's.
    struct VerifiedReceipt: Sendable {
        var productID: String
        /// `ios` or `android`: a receipt comes from an app store, never from the web.
        var platform: String
        var hash: Data
    }

    private func sandboxCounts(for userID: UUID) -> Bool {
        configuration.environment == .sandbox || configuration.sandboxUsers.contains(userID)
    }

    /// Writes `snapshot` as `userID`'s subscriptions and entitlement in one transaction, serialised per
    /// user by the entitlement's row lock. Every store in `BFF_IAP_STORES` counts, the web's and
    /// promotional grants as the app stores'; a subscription from another store is left out (and a
    /// row of it, kept before, removed). A snapshot not newer than the one applied last changes
    /// nothing (a slower re-sync finishing after a faster one). Answers false when the user no longer
    /// exists. `asked` is when RevenueCat was asked: the user's `synced_at`, which tells the expiry
    /// job which webhook events a re-sync has covered.
    @discardableResult
    func apply(
        _ snapshot: SubscriberSnapshot, userID: UUID, receipt: VerifiedReceipt? = nil, asked: Date
    ) async throws -> Bool {
        let now = Date()
        let sandboxCounts = sandboxCounts(for: userID)
        return try await database.run { client in
            try await client.withTransaction(logger: logger) { connection in
                var applied: Date?
                var exists = false
                for try await (known, at) in try await connection.query(
                    """
                    WITH me AS (SELECT id FROM users WHERE id = \(userID)),
                    created AS (
                        INSERT INTO entitlements (user_id, plan, snapshot_at) SELECT id, 'free', '-infinity' FROM me
                        ON CONFLICT (user_id) DO NOTHING
                    )
                    SELECT true, e.snapshot_at FROM me LEFT JOIN entitlements e ON e.user_id = me.id
                    """, logger: logger
                ).decode((Bool, Date?).self) { (exists, applied) = (known, at) }
                guard exists else { return false }
                // Taken after the insert above commits for a concurrent writer: this row lock serialises the user's writers.
                for try await at in try await connection.query(
                    """
                    UPDATE entitlements SET synced_at = greatest(synced_at, \(asked)) WHERE user_id = \(userID)
                    RETURNING snapshot_at
                    """, logger: logger
                ).decode(Date.self) { applied = at }
                if let applied, applied >= snapshot.takenAt { return true }

                var formerOwners: Set<UUID> = []
                var keep: [String] = []
                for subscription in snapshot.subscriptions {
                    guard let store = PurchaseStore(rawValue: subscription.store), configuration.stores.contains(store) else { continue }
                    let facts = SubscriptionFacts(subscription)
                    let receiptHash = receipt.flatMap { $0.productID == subscription.productID && $0.platform == subscription.platform ? $0.hash : nil }
                    let fromReceipt = receiptHash != nil
                    let hash = receiptHash ?? subscription.hash
                    keep.append(subscription.receiptID(of: userID))
                    for try await former in try await connection.query(
                        """
                        WITH before AS (SELECT user_id FROM iap_receipts WHERE receipt_id = \(subscription.receiptID(of: userID))),
                        written AS (
                            INSERT INTO iap_receipts (
                                receipt_id, user_id, store, platform, product_id, entitlement_id, status, purchase_at, expires_at,
                                raw_payload_hash, will_renew, period_type, unsubscribed_at, billing_issue_at, grace_until, refunded_at,
                                resumes_at, sandbox, management_url, snapshot_at)
                            VALUES (
                                \(subscription.receiptID(of: userID)), \(userID), \(subscription.store), \(subscription.platform),
                                \(subscription.productID), \(subscription.entitlementID), \(facts.status(at: now).rawValue),
                                \(subscription.purchaseAt), \(subscription.expiresAt), \(hash), \(facts.willRenew(at: now)),
                                \(subscription.periodType), \(subscription.unsubscribedAt), \(subscription.billingIssueAt),
                                \(subscription.graceUntil), \(subscription.refundedAt), \(subscription.resumesAt), \(subscription.sandbox),
                                \(subscription.managementURL), \(snapshot.takenAt))
                            ON CONFLICT (receipt_id) DO UPDATE SET
                                user_id = excluded.user_id, store = excluded.store, platform = excluded.platform,
                                product_id = excluded.product_id, entitlement_id = excluded.entitlement_id,
                                status = excluded.status, purchase_at = excluded.purchase_at, expires_at = excluded.expires_at,
                                raw_payload_hash = CASE WHEN \(fromReceipt) THEN excluded.raw_payload_hash ELSE iap_receipts.raw_payload_hash END,
                                will_renew = excluded.will_renew, period_type = excluded.period_type,
                                unsubscribed_at = excluded.unsubscribed_at, billing_issue_at = excluded.billing_issue_at,
                                grace_until = excluded.grace_until, refunded_at = excluded.refunded_at, resumes_at = excluded.resumes_at,
                                sandbox = excluded.sandbox, management_url = excluded.management_url, snapshot_at = excluded.snapshot_at,
                                updated_at = now()
                            WHERE iap_receipts.snapshot_at < excluded.snapshot_at
                            RETURNING user_id
                        )
                        SELECT before.user_id FROM before, written WHERE before.user_id <> \(userID)
                        """, logger: logger
                    ).decode(UUID.self) { formerOwners.insert(former) }
                }
                // What the snapshot no longer lists (transferred away, or gone from the store) is no longer the user's.
                _ = try await connection.query(
                    """
                    DELETE FROM iap_receipts
                    WHERE user_id = \(userID) AND NOT (receipt_id = ANY(\(keep))) AND snapshot_at < \(snapshot.takenAt)
                    """, logger: logger)
                try await writeEntitlement(userID: userID, snapshotAt: snapshot.takenAt, sandboxCounts: sandboxCounts, now: now, on: connection)
                // A subscription transferred here leaves its former owner's plan at once, not at that
                // user's own re-sync (which the TRANSFER event asks for too).
                for former in formerOwners.sorted(by: { $0.uuidString < $1.uuidString }) {
                    try await writeEntitlement(userID: former, snapshotAt: nil, sandboxCounts: self.sandboxCounts(for: former), now: now, on: connection)
                }
                return true
            }
        }
    }

    /// Derives `userID`'s entitlement from their rows and stores it.
    private func writeEntitlement(userID: UUID, snapshotAt: Date?, sandboxCounts: Bool, now: Date, on connection: PostgresConnection) async throws {
        let rows = try await Self.facts(userID: userID, on: connection, logger: logger)
        let entitlement = Entitlement.derive(
            from: rows, products: configuration.products, entitlements: configuration.entitlements, sandboxCounts: sandboxCounts, at: now)
        for facts in rows where configuration.plan(of: facts) == nil {
            if facts.store == PurchaseStore.promotional.rawValue {
                logger.warning(
                    "a promotional grant's entitlement is in no plan; add it to BFF_IAP_ENTITLEMENTS",
                    metadata: ["product_id": .string(facts.productID), "entitlement": .string(facts.entitlementID ?? "unknown")])
            } else {
                logger.warning(
                    "a subscription's product is in no plan; add it to BFF_IAP_PRODUCTS",
                    metadata: ["product_id": .string(facts.productID), "store": .string(facts.store)])
            }
        }
        _ = try await connection.query(
            """
            UPDATE entitlements SET plan = \(entitlement.plan.rawValue), status = \(entitlement.status?.rawValue),
                access_until = \(entitlement.accessUntil), will_renew = \(entitlement.willRenew),
                snapshot_at = coalesce(\(snapshotAt), snapshot_at)
            WHERE user_id = \(userID)
            """, logger: logger)
    }

    private static func facts(userID: UUID, on connection: PostgresConnection, logger: Logger) async throws -> [SubscriptionFacts] {
        var rows: [SubscriptionFacts] = []
        for try await row in try await connection.query(
            """
            SELECT product_id, store, purchase_at, expires_at, period_type, unsubscribed_at, billing_issue_at, grace_until,
                   refunded_at, resumes_at, sandbox, management_url, entitlement_id
            FROM iap_receipts WHERE user_id = \(userID)
            ORDER BY expires_at DESC NULLS FIRST, receipt_id
            """, logger: logger
        ).decode((String, String, Date, Date?, String?, Date?, Date?, Date?, Date?, Date?, Bool, String?, String?).self) {
            rows.append(
                SubscriptionFacts(
                    productID: row.0, store: row.1, purchaseAt: row.2, expiresAt: row.3, periodType: row.4, unsubscribedAt: row.5,
                    billingIssueAt: row.6, graceUntil: row.7, refundedAt: row.8, resumesAt: row.9, sandbox: row.10, managementURL: row.11,
                    entitlementID: row.12))
        }
        return rows
    }

    /// The user's entitlement as every limit reads it (free without a row).
    func entitlement(userID: UUID) async throws -> Entitlement {
        try await database.run { client in
            for try await (plan, status, until, renews) in try await client.query(
                "SELECT plan, status, access_until, will_renew FROM entitlements WHERE user_id = \(userID)", logger: logger
            ).decode((String, String?, Date?, Bool).self) {
                return effective(plan: plan, status: status, accessUntil: until, willRenew: renews)
            }
            return .free
        }
    }

    /// An `entitlements` row's columns (all nil without a row) as every reader takes them: read now.
    func effective(plan: String?, status: String?, accessUntil: Date?, willRenew: Bool?) -> Entitlement {
        guard let plan else { return .free }
        let stored = Entitlement(
            plan: Plan(rawValue: plan) ?? .free, status: status.flatMap(SubscriptionStatus.init(rawValue:)), accessUntil: accessUntil,
            willRenew: willRenew ?? false)
        return stored.effective(at: Date(), renewalLeeway: configuration.renewalLeeway)
    }

    /// The entitlement with the subscriptions it comes from, as `/me/subscription` answers.
    func view(userID: UUID) async throws -> View {
        let entitlement = try await entitlement(userID: userID)
        let now = Date()
        let rows = try await database.run { client in
            try await client.withConnection { connection in try await Self.facts(userID: userID, on: connection, logger: logger) }
        }.map { Row(facts: $0, status: $0.status(at: now), willRenew: $0.willRenew(at: now)) }
        let granting =
            entitlement.plan == .free
            ? nil
            : rows.first { row in
                configuration.plan(of: row.facts) == entitlement.plan && row.status.grantsAccess
                    && (sandboxCounts(for: userID) || !row.facts.sandbox)
            }
        return View(entitlement: entitlement, subscriptions: rows, granting: granting)
    }
}

extension SubscriptionFacts {
    init(_ subscription: SubscriberSnapshot.Subscription) {
        self.init(
            productID: subscription.productID, store: subscription.store, purchaseAt: subscription.purchaseAt, expiresAt: subscription.expiresAt,
            periodType: subscription.periodType, unsubscribedAt: subscription.unsubscribedAt, billingIssueAt: subscription.billingIssueAt,
            graceUntil: subscription.graceUntil, refundedAt: subscription.refundedAt, resumesAt: subscription.resumesAt,
            sandbox: subscription.sandbox, managementURL: subscription.managementURL, entitlementID: subscription.entitlementID)
    }
}
