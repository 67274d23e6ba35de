import BFFPlatform
import Foundation

/// One of the plans a subscription unlocks (docs/requirements.md §7: the web's two B2C plans), ordered so
/// that the higher plan wins.
public enum Plan: String, Sendable, Codable, Comparable, CaseIterable {
    case free, basic, pro

    private var rank: Int {
        switch self {
        case .free: 0
        case .basic: 1
        case .pro: 2
        }
    }

    public static func < (lhs: Plan, rhs: Plan) -> Bool { lhs.rank < rhs.rank }
}

/// Where a subscription was bought, as RevenueCat names it (`store` of a subscriber's subscription):
/// the stores this server knows. Each has its own place where the user manages the purchase.
public enum PurchaseStore: String, Sendable, CaseIterable {
    /// The App Store: managed in the iPhone's subscription settings.
    case appStore = "app_store"
    /// Google Play: managed in the Play Store's subscriptions.
    case playStore = "play_store"
    /// Stripe, connected to RevenueCat: managed on the web (Stripe's customer portal, when configured).
    case stripe
    /// RevenueCat Web Billing: managed on the web (RevenueCat's customer portal).
    case rcBilling = "rc_billing"
    /// An entitlement granted in RevenueCat: nothing to manage, it ends at its end.
    case promotional

    /// The app's platform for the two app stores (`iap_receipts.platform`); nil for the web's and a grant.
    var platform: String? {
        switch self {
        case .appStore: "ios"
        case .playStore: "android"
        case .stripe, .rcBilling, .promotional: nil
        }
    }

    /// Whether the store bills it again: a promotional grant never renews.
    var renews: Bool { self != .promotional }
}

/// Subscriptions through RevenueCat (`BFF_REVENUECAT_*`, `BFF_IAP_*`, docs/configuration.md).
public struct SubscriptionConfiguration: Sendable {
    public enum Environment: String, Sendable { case production, sandbox }

    /// RevenueCat's secret API key; without it, verification is 503 `store_unavailable` and re-syncs wait.
    public var apiKey: String?
    /// Without a trailing slash; `/receipts` and `/subscribers/{id}` are appended.
    public var baseURL: String
    /// The whole `Authorization` value RevenueCat's webhook sends; without it the webhook is 503.
    public var webhookAuthorization: String?
    /// Product id → the plan it unlocks, the App Store's, Google Play's and the web's (RevenueCat Web
    /// Billing, Stripe) alike; a product not listed unlocks nothing.
    public var products: [String: Plan]
    /// RevenueCat entitlement identifier → the plan a promotional grant of it unlocks (its product,
    /// `rc_promo_<entitlement>_<duration>`, is in no store); an entitlement not listed unlocks nothing.
    public var entitlements: [String: Plan]
    /// The stores whose subscriptions count (RevenueCat's `store`); a subscription from any other is ignored.
    public var stores: Set<PurchaseStore>
    /// In `production`, sandbox purchases (TestFlight, license testers) unlock nothing, except for `sandboxUsers`.
    public var environment: Environment
    public var sandboxUsers: Set<UUID>
    /// RevenueCat requests per second for the re-syncs webhooks and the expiry job ask for.
    public var syncRate: Int
    /// RevenueCat requests per second for the nightly reconcile of every live subscription.
    public var reconcileRate: Int
    /// How often the expiry job runs.
    public var expiryInterval: Duration
    /// The longest one RevenueCat call may take (`BFF_REVENUECAT_TIMEOUT`, seconds).
    public var timeout: Duration

    /// How long past its end a subscription that will renew still counts: a renewal whose webhook
    /// never came is found by the expiry job within one run, and the learner is not cut off meanwhile.
    var renewalLeeway: Duration { expiryInterval * 2 }

    init(_ reader: EnvironmentReader) throws {
        apiKey = reader.optional("BFF_REVENUECAT_API_KEY")
        let base = reader.string("BFF_REVENUECAT_BASE_URL", default: "https://api.revenuecat.com/v1")
        guard let url = URL(string: base), let scheme = url.scheme, let host = url.host, url.query == nil,
            scheme == "https" || (scheme == "http" && ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host))
        else { throw ConfigurationError("BFF_REVENUECAT_BASE_URL", "must be an https URL (http only for localhost), got \"\(base)\"") }
        baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        webhookAuthorization = reader.optional("BFF_REVENUECAT_WEBHOOK_AUTH")
        if let webhookAuthorization, webhookAuthorization.utf8.count < 16 {
            throw ConfigurationError("BFF_REVENUECAT_WEBHOOK_AUTH", "must be at least 16 characters: it is the webhook's only credential")
        }
        products = try Self.plans("BFF_IAP_PRODUCTS", of: "product_id", reader)
        entitlements = try Self.plans("BFF_IAP_ENTITLEMENTS", of: "entitlement", reader)
        let storeNames = reader.list("BFF_IAP_STORES", default: PurchaseStore.allCases.map(\.rawValue))
        let known = PurchaseStore.allCases.map(\.rawValue).joined(separator: ", ")
        guard !storeNames.isEmpty else { throw ConfigurationError("BFF_IAP_STORES", "must list at least one of \(known), comma separated") }
        stores = Set(
            try storeNames.map { name in
                guard let store = PurchaseStore(rawValue: name) else {
                    throw ConfigurationError("BFF_IAP_STORES", "must list stores of \(known), comma separated, got \"\(name)\"")
                }
                return store
            })
        let environmentName = reader.string("BFF_IAP_ENVIRONMENT", default: "production")
        guard let environment = Environment(rawValue: environmentName) else {
            throw ConfigurationError("BFF_IAP_ENVIRONMENT", "must be production or sandbox, got \"\(environmentName)\"")
        }
        self.environment = environment
        sandboxUsers = Set(
            try reader.list("BFF_IAP_SANDBOX_USERS", default: []).map { text in
                guard let id = UUID(uuidString: text) else { throw ConfigurationError("BFF_IAP_SANDBOX_USERS", "must list user ids (UUIDs), got \"\(text)\"") }
                return id
            })
        syncRate = try reader.int("BFF_REVENUECAT_SYNC_RATE", default: 5, range: 1...1_000)
        reconcileRate = try reader.int("BFF_REVENUECAT_RECONCILE_RATE", default: 1, range: 1...1_000)
        expiryInterval = .seconds(try reader.int("BFF_IAP_EXPIRY_INTERVAL", default: 300, range: 10...86_400))
        timeout = .seconds(try reader.int("BFF_REVENUECAT_TIMEOUT", default: 10, range: 1...60))
    }

    public init(
        apiKey: String?, baseURL: String, webhookAuthorization: String? = nil, products: [String: Plan] = [:],
        entitlements: [String: Plan] = [:], stores: Set<PurchaseStore> = Set(PurchaseStore.allCases),
        environment: Environment = .production, sandboxUsers: Set<UUID> = [], syncRate: Int = 5, reconcileRate: Int = 1,
        expiryInterval: Duration = .seconds(300), timeout: Duration = .seconds(10)
    ) {
        self.apiKey = apiKey
        self.baseURL = baseURL
        self.webhookAuthorization = webhookAuthorization
        self.products = products
        self.entitlements = entitlements
        self.stores = stores
        self.environment = environment
        self.sandboxUsers = sandboxUsers
        self.syncRate = syncRate
        self.reconcileRate = reconcileRate
        self.expiryInterval = expiryInterval
        self.timeout = timeout
    }

    /// The plan a stored subscription unlocks: its product's, else for a promotional grant its
    /// entitlement's; nil when neither is listed.
    func plan(of facts: SubscriptionFacts) -> Plan? {
        facts.plan(products: products, entitlements: entitlements)
    }

    /// Reads `name`, a comma list of `key=basic` or `key=pro` (`key` is what the error calls it).
    private static func plans(_ name: String, of key: String, _ reader: EnvironmentReader) throws -> [String: Plan] {
        var plans: [String: Plan] = [:]
        for entry in reader.list(name, default: []) {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, let plan = Plan(rawValue: parts[1]), plan != .free else {
                throw ConfigurationError(name, "must list \(key)=basic or \(key)=pro, comma separated, got \"\(entry)\"")
            }
            plans[parts[0]] = plan
        }
        return plans
    }
}
