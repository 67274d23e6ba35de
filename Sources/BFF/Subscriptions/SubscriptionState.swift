import BFFPlatform
import Foundation

/// The six statuses of a subscription, from any store (docs/requirements.md §10.2).
enum SubscriptionStatus: String, Sendable, Codable, CaseIterable {
    case trial, active, grace, paused, canceled, expired

    /// Whether a subscription in this status unlocks its plan: a canceled one still does until its
    /// paid period ends; a paused one does not until it resumes.
    var grantsAccess: Bool {
        switch self {
        case .trial, .active, .grace, .canceled: true
        case .paused, .expired: false
        }
    }
}

/// What a subscription's status is derived from: the facts RevenueCat's snapshot gives, as a row keeps
/// them. One derivation for every store: a web purchase, a promotional grant and an app-store
/// subscription with the same facts have the same status.
struct SubscriptionFacts: Sendable, Equatable {
    var productID: String
    /// RevenueCat's `store`: `app_store`, `play_store`, `stripe`, `rc_billing` or `promotional`.
    var store: String
    var purchaseAt: Date
    var expiresAt: Date?
    var periodType: String?
    var unsubscribedAt: Date?
    var billingIssueAt: Date?
    var graceUntil: Date?
    var refundedAt: Date?
    var resumesAt: Date?
    var sandbox: Bool
    var managementURL: String?
    /// For a promotional grant, the RevenueCat entitlement it gives; nil for a purchase.
    var entitlementID: String? = nil

    /// The app's platform (`ios`, `android`) for the two app stores; nil for the web's and a grant.
    var platform: String? { PurchaseStore(rawValue: store)?.platform }

    /// The plan it unlocks: its product's in `products`, else, for a promotional grant, its
    /// entitlement's in `entitlements`; nil when neither lists it.
    func plan(products: [String: Plan], entitlements: [String: Plan]) -> Plan? {
        if let plan = products[productID] { return plan }
        guard store == PurchaseStore.promotional.rawValue, let entitlementID else { return nil }
        return entitlements[entitlementID]
    }

    /// The status at `now`, by the issue's rules, first match wins: refunded → expired; a billing
    /// issue within its grace period → grace; not yet expired (or without an end) → canceled when
    /// auto-renew is off, else trial during a trial period, else active; paused with a resume date
    /// → paused; otherwise expired.
    func status(at now: Date) -> SubscriptionStatus {
        if refundedAt != nil { return .expired }
        if billingIssueAt != nil, let graceUntil, graceUntil > now { return .grace }
        if expiresAt.map({ $0 > now }) ?? true {
            if unsubscribedAt != nil { return .canceled }
            return periodType?.lowercased() == "trial" ? .trial : .active
        }
        if resumesAt != nil { return .paused }
        return .expired
    }

    /// Whether the store will bill it again: auto-renew on and neither refunded nor over. A
    /// promotional grant never is: it ends at its end.
    func willRenew(at now: Date) -> Bool {
        (PurchaseStore(rawValue: store)?.renews ?? true) && refundedAt == nil && unsubscribedAt == nil && status(at: now) != .expired
    }

    /// Until when it unlocks its plan: the grace period's end while in grace, else the paid period's.
    func accessUntil(at now: Date) -> Date? {
        status(at: now) == .grace ? graceUntil : expiresAt
    }
}

/// The plan a user's subscriptions unlock, with the status and end of the one that unlocks it.
struct Entitlement: Sendable, Equatable {
    var plan: Plan
    var status: SubscriptionStatus?
    var accessUntil: Date?
    var willRenew: Bool

    static let free = Entitlement(plan: .free, status: nil, accessUntil: nil, willRenew: false)

    /// Derived from every subscription of the user at `now`, whichever store it comes from. A product
    /// `products` does not list (a promotional grant: an entitlement `entitlements` does not list), and
    /// a sandbox purchase where sandbox ones do not count, unlock nothing. Pro wins over Basic; between
    /// two of one plan, the one that lasts longer. Without any, the plan is free and the status that of
    /// the latest subscription.
    static func derive(
        from subscriptions: [SubscriptionFacts], products: [String: Plan], entitlements: [String: Plan] = [:], sandboxCounts: Bool,
        at now: Date
    ) -> Entitlement {
        var best: (plan: Plan, facts: SubscriptionFacts)?
        for facts in subscriptions where facts.status(at: now).grantsAccess && (sandboxCounts || !facts.sandbox) {
            guard let plan = facts.plan(products: products, entitlements: entitlements), plan != .free else { continue }
            if let current = best {
                let longer = (facts.accessUntil(at: now) ?? .distantFuture) > (current.facts.accessUntil(at: now) ?? .distantFuture)
                guard plan > current.plan || (plan == current.plan && longer) else { continue }
            }
            best = (plan, facts)
        }
        if let best {
            return Entitlement(
                plan: best.plan, status: best.facts.status(at: now), accessUntil: best.facts.accessUntil(at: now),
                willRenew: best.facts.willRenew(at: now))
        }
        let latest = subscriptions.max { ($0.expiresAt ?? $0.purchaseAt) < ($1.expiresAt ?? $1.purchaseAt) }
        return Entitlement(plan: .free, status: latest?.status(at: now), accessUntil: nil, willRenew: false)
    }

    /// The entitlement as stored, read at `now`: once its access has ended it is free, at once for a
    /// subscription that will not renew, after `renewalLeeway` for one that should have (its renewal
    /// is confirmed or refuted by the expiry job's re-sync within that time).
    func effective(at now: Date, renewalLeeway: Duration) -> Entitlement {
        guard plan != .free, let accessUntil else { return self }
        let end = willRenew ? accessUntil.addingTimeInterval(renewalLeeway.seconds) : accessUntil
        guard now >= end else { return self }
        return Entitlement(plan: .free, status: .expired, accessUntil: nil, willRenew: false)
    }
}
