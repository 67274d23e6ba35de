import Foundation
import Testing

@testable import BFF
@testable import BFFPlatform

/// The six statuses and the entitlement, as pure functions of a subscription's facts and the time.
@Suite("Subscription state")
struct SubscriptionStateTests {
    let now = Date(timeIntervalSince1970: 1_780_000_000)
    var later: Date { now.addingTimeInterval(86_400) }
    var earlier: Date { now.addingTimeInterval(-86_400) }

    func facts(
        _ product: String = "pro.monthly", store: String = "app_store", expires: Date?, period: String = "normal", unsubscribed: Date? = nil,
        billingIssue: Date? = nil, grace: Date? = nil, refunded: Date? = nil, resumes: Date? = nil, sandbox: Bool = false, entitlement: String? = nil
    ) -> SubscriptionFacts {
        SubscriptionFacts(
            productID: product, store: store, purchaseAt: now.addingTimeInterval(-30 * 86_400), expiresAt: expires, periodType: period,
            unsubscribedAt: unsubscribed, billingIssueAt: billingIssue, graceUntil: grace, refundedAt: refunded, resumesAt: resumes,
            sandbox: sandbox, managementURL: nil, entitlementID: entitlement)
    }

    @Test("each status from its facts, the rules taken in order")
    func statuses() {
        #expect(facts(expires: later).status(at: now) == .active)
        #expect(facts(expires: nil).status(at: now) == .active)
        #expect(facts(expires: later, period: "TRIAL").status(at: now) == .trial)
        #expect(facts(expires: later, period: "intro").status(at: now) == .active)
        #expect(facts(expires: later, unsubscribed: earlier).status(at: now) == .canceled)
        // Canceled wins over trial: auto-renew off is what the user must see.
        #expect(facts(expires: later, period: "trial", unsubscribed: earlier).status(at: now) == .canceled)
        #expect(facts(expires: earlier, billingIssue: earlier, grace: later).status(at: now) == .grace)
        // A grace period that ran out, and a billing issue without one.
        #expect(facts(expires: earlier, billingIssue: earlier, grace: earlier).status(at: now) == .expired)
        #expect(facts(expires: later, billingIssue: earlier).status(at: now) == .active)
        #expect(facts(expires: earlier, resumes: later).status(at: now) == .paused)
        #expect(facts(expires: earlier).status(at: now) == .expired)
        // A refund ends it whatever else is true.
        #expect(facts(expires: later, billingIssue: earlier, grace: later, refunded: earlier).status(at: now) == .expired)
        #expect(facts(expires: later, refunded: earlier).willRenew(at: now) == false)
        #expect(facts(expires: later, unsubscribed: earlier).willRenew(at: now) == false)
        #expect(facts(expires: later).willRenew(at: now) == true)
        #expect(facts(expires: earlier, billingIssue: earlier, grace: later).accessUntil(at: now) == later)
    }

    @Test("the entitlement: Pro wins over Basic, unknown products and sandbox purchases unlock nothing, paused and expired grant no access")
    func entitlement() {
        let products: [String: Plan] = ["basic.monthly": .basic, "pro.monthly": .pro]
        func derive(_ rows: [SubscriptionFacts], sandbox: Bool = false) -> Entitlement {
            Entitlement.derive(from: rows, products: products, sandboxCounts: sandbox, at: now)
        }
        #expect(derive([]) == .free)
        let both = derive([facts("basic.monthly", expires: later.addingTimeInterval(86_400)), facts("pro.monthly", expires: later)])
        #expect(both.plan == .pro && both.accessUntil == later && both.status == .active && both.willRenew)
        #expect(derive([facts("other.product", expires: later)]).plan == .free)
        #expect(derive([facts(expires: later, sandbox: true)]).plan == .free)
        #expect(derive([facts(expires: later, sandbox: true)], sandbox: true).plan == .pro)
        let paused = derive([facts(expires: earlier, resumes: later)])
        #expect(paused.plan == .free && paused.status == .paused)
        let canceled = derive([facts(expires: later, unsubscribed: earlier)])
        #expect(canceled.plan == .pro && canceled.status == .canceled && !canceled.willRenew)
        let lapsed = derive([facts("basic.monthly", expires: earlier)])
        #expect(lapsed.plan == .free && lapsed.status == .expired && lapsed.accessUntil == nil)
    }

    @Test("every store's subscription gets its status by the same rules; a promotional grant never renews and unlocks its entitlement's plan")
    func everyStore() {
        let cases: [(String, (String) -> SubscriptionFacts)] = [
            ("active", { facts(store: $0, expires: later) }), ("trial", { facts(store: $0, expires: later, period: "trial") }),
            ("canceled", { facts(store: $0, expires: later, unsubscribed: earlier) }),
            ("grace", { facts(store: $0, expires: earlier, billingIssue: earlier, grace: later) }),
            ("paused", { facts(store: $0, expires: earlier, resumes: later) }), ("expired", { facts(store: $0, expires: earlier) }),
            ("expired", { facts(store: $0, expires: later, refunded: earlier) }),
        ]
        for (expected, make) in cases {
            for store in PurchaseStore.allCases {
                #expect(make(store.rawValue).status(at: now).rawValue == expected, "\(store) \(expected)")
            }
        }
        #expect(facts(store: "app_store", expires: later).platform == "ios" && facts(store: "play_store", expires: later).platform == "android")
        for store in ["stripe", "rc_billing", "promotional"] {
            #expect(facts(store: store, expires: later).platform == nil)
            #expect(facts(store: store, expires: later).willRenew(at: now) == (store != "promotional"), "\(store)")
        }

        let products: [String: Plan] = ["basic.monthly": .basic, "pro.monthly": .pro, "web_pro_monthly": .pro]
        let entitlements: [String: Plan] = ["pro_access": .pro, "basic_access": .basic]
        func derive(_ rows: [SubscriptionFacts]) -> Entitlement {
            Entitlement.derive(from: rows, products: products, entitlements: entitlements, sandboxCounts: false, at: now)
        }
        // The web's products unlock their plans as the app stores' do.
        let web = derive([facts("web_pro_monthly", store: "stripe", expires: later), facts("basic.monthly", store: "rc_billing", expires: later)])
        #expect(web.plan == .pro && web.status == .active && web.willRenew)
        // A grant maps by its entitlement, not its product, and ends at its end.
        let grant = facts("rc_promo_pro_access_monthly", store: "promotional", expires: later, entitlement: "pro_access")
        #expect(grant.plan(products: products, entitlements: entitlements) == .pro)
        let granted = derive([grant, facts("basic.monthly", expires: later.addingTimeInterval(86_400))])
        #expect(granted == Entitlement(plan: .pro, status: .active, accessUntil: later, willRenew: false))
        #expect(granted.effective(at: later.addingTimeInterval(1), renewalLeeway: .seconds(600)).plan == .free)
        #expect(derive([facts("rc_promo_vip_monthly", store: "promotional", expires: later, entitlement: "vip")]).plan == .free)
        // An entitlement counts only for a grant: a purchase's product must be listed itself.
        #expect(derive([facts("pro_access", store: "stripe", expires: later, entitlement: "pro_access")]).plan == .free)
        #expect(derive([facts("rc_promo_pro_access_monthly", store: "promotional", expires: later)]).plan == .free)
    }

    @Test("a stored entitlement read later: a canceled one ends at its end, one that will renew gets the leeway for the expiry job")
    func effective() {
        let renewing = Entitlement(plan: .pro, status: .active, accessUntil: now, willRenew: true)
        #expect(renewing.effective(at: now.addingTimeInterval(60), renewalLeeway: .seconds(600)).plan == .pro)
        #expect(renewing.effective(at: now.addingTimeInterval(601), renewalLeeway: .seconds(600)) == Entitlement(plan: .free, status: .expired, accessUntil: nil, willRenew: false))
        let canceled = Entitlement(plan: .basic, status: .canceled, accessUntil: now, willRenew: false)
        #expect(canceled.effective(at: now.addingTimeInterval(1), renewalLeeway: .seconds(600)).plan == .free)
        #expect(canceled.effective(at: now.addingTimeInterval(-1), renewalLeeway: .seconds(600)).plan == .basic)
        let lifetime = Entitlement(plan: .pro, status: .active, accessUntil: nil, willRenew: false)
        #expect(lifetime.effective(at: later, renewalLeeway: .zero).plan == .pro)
    }

    @Test("BFF_PLAN_LIMITS: defaults, a partial override, unlimited as null, and every unknown key refused")
    func planLimits() throws {
        func parse(_ text: String?) throws -> PlanLimits {
            try PlanLimits(EnvironmentReader(text.map { ["BFF_PLAN_LIMITS": $0] } ?? [:]))
        }
        #expect(try parse(nil) == .defaults)
        #expect(PlanLimits.defaults.turns(for: .free) == 20 && PlanLimits.defaults.turns(for: .basic) == 200 && PlanLimits.defaults.turns(for: .pro) == nil)
        let custom = try parse(#"{"free": {"turns_per_day": 5}, "basic": {"turns_per_day": null}, "features": {"instant_question": "pro"}}"#)
        #expect(custom.turns(for: .free) == 5 && custom.turns(for: .basic) == nil && custom.turns(for: .pro) == nil)
        #expect(custom.features[.instantQuestion] == .pro)
        for bad in [
            "20", #"{"gold": {}}"#, #"{"free": {"turns": 5}}"#, #"{"free": {"turns_per_day": -1}}"#, #"{"free": {"turns_per_day": 2.5}}"#,
            #"{"free": {"turns_per_day": true}}"#, #"{"features": {"teleport": "pro"}}"#, #"{"features": {"instant_question": "gold"}}"#,
        ] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try parse(bad) }
        }
    }

    @Test("RevenueCat's snapshot read: dates with and without fractions, the stores kept apart, garbage refused")
    func snapshot() throws {
        let json = """
            {"request_date": "2026-01-01T00:00:00Z", "request_date_ms": 1767225600123,
             "subscriber": {"management_url": "https://apps.apple.com/account/subscriptions", "subscriptions": {
               "pro.monthly": {"store": "app_store", "purchase_date": "2025-12-01T00:00:00Z", "original_purchase_date": "2025-10-01T00:00:00.500Z",
                 "expires_date": "2026-01-31T00:00:00Z", "period_type": "normal", "is_sandbox": false, "unsubscribe_detected_at": null,
                 "billing_issues_detected_at": null, "refunded_at": null, "auto_resume_date": null, "new_field": {"x": 1}},
               "web.plan": {"store": "stripe", "purchase_date": "2025-12-01T00:00:00Z", "expires_date": null}}}}
            """
        let snapshot = try #require(SubscriberSnapshot(json: Data(json.utf8)))
        #expect(snapshot.takenAt == Date(timeIntervalSince1970: 1_767_225_600.123))
        let pro = try #require(snapshot.subscriptions.first { $0.productID == "pro.monthly" })
        #expect(pro.platform == "ios" && pro.managementURL == "https://apps.apple.com/account/subscriptions")
        let user = UUID()
        #expect(pro.receiptID(of: user) == "app_store:pro.monthly:\(user.uuidString.lowercased())")
        #expect(pro.originalPurchaseAt == Date(timeIntervalSince1970: 1_759_276_800.5))
        #expect(snapshot.subscriptions.first { $0.productID == "web.plan" }?.platform == nil)
        #expect(snapshot.subscriptions.first { $0.productID == "web.plan" }?.managementURL == nil)
        #expect(SubscriberSnapshot(json: Data("<html>502</html>".utf8)) == nil)
        #expect(SubscriberSnapshot(json: Data(#"{"request_date_ms": 1}"#.utf8)) == nil)
        #expect(SubscriberSnapshot(json: Data(#"{"request_date_ms": 1, "subscriber": {"subscriptions": {"p": {"store": "app_store"}}}}"#.utf8)) == nil)
    }

    @Test("RevenueCat's snapshot of web purchases and promotional grants: each store kept, a grant's entitlement, the management URL on its store's subscriptions only")
    func webAndPromotionalSnapshot() throws {
        let json = """
            {"request_date_ms": 1767225600000,
             "subscriber": {"management_url": "https://billing.example.com/portal/abc",
               "entitlements": {
                 "pro_access": {"product_identifier": "rc_promo_pro_access_monthly", "purchase_date": "2025-12-20T00:00:00Z", "expires_date": "2026-01-20T00:00:00Z"},
                 "basic_access": {"product_identifier": "web_basic", "purchase_date": "2025-12-01T00:00:00Z", "expires_date": "2026-02-01T00:00:00Z"}},
               "subscriptions": {
                 "web_basic": {"store": "rc_billing", "purchase_date": "2025-12-01T00:00:00Z", "expires_date": "2026-02-01T00:00:00Z",
                   "period_type": "normal", "is_sandbox": false, "unsubscribe_detected_at": null},
                 "prod_WebPro": {"store": "stripe", "purchase_date": "2025-06-01T00:00:00Z", "expires_date": "2025-07-01T00:00:00Z"},
                 "pro.monthly": {"store": "app_store", "purchase_date": "2025-11-01T00:00:00Z", "expires_date": "2025-12-01T00:00:00Z"},
                 "rc_promo_pro_access_monthly": {"store": "promotional", "purchase_date": "2025-12-20T00:00:00Z",
                   "expires_date": "2026-01-20T00:00:00Z", "period_type": "normal", "is_sandbox": false, "unsubscribe_detected_at": null},
                 "rc_promo_pro_access_weekly": {"store": "promotional", "purchase_date": "2025-11-01T00:00:00Z", "expires_date": "2025-11-08T00:00:00Z"},
                 "boxed": {"store": "amazon", "purchase_date": "2025-12-01T00:00:00Z", "expires_date": "2026-01-31T00:00:00Z"}}}}
            """
        let snapshot = try #require(SubscriberSnapshot(json: Data(json.utf8)))
        func entry(_ product: String) throws -> SubscriberSnapshot.Subscription {
            try #require(snapshot.subscriptions.first { $0.productID == product })
        }
        #expect(try entry("web_basic").store == "rc_billing" && entry("web_basic").platform == nil && entry("prod_WebPro").platform == nil)
        // The portal is the active web subscription's: not the lapsed Stripe one's, the App Store one's or a grant's.
        #expect(try entry("web_basic").managementURL == "https://billing.example.com/portal/abc")
        for product in ["prod_WebPro", "pro.monthly", "rc_promo_pro_access_monthly", "boxed"] {
            #expect(try entry(product).managementURL == nil, "\(product)")
        }
        // The grant's entitlement: the one naming its product, else read from the product (an entitlement names only its latest).
        #expect(try entry("rc_promo_pro_access_monthly").entitlementID == "pro_access")
        #expect(try entry("rc_promo_pro_access_weekly").entitlementID == "pro_access")
        #expect(try entry("web_basic").entitlementID == nil && entry("boxed").store == "amazon")

        let products: [String: String] = ["premium": "rc_promo_premium_lifetime"]
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "rc_promo_premium_lifetime", entitlementProducts: products) == "premium")
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "rc_promo_pro_cat_three_month", entitlementProducts: [:]) == "pro_cat")
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "rc_promo_free-sws_two_week", entitlementProducts: [:]) == "free-sws")
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "rc_promo_pro_custom", entitlementProducts: [:]) == nil)
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "pro.monthly", entitlementProducts: [:]) == nil)
        #expect(SubscriberSnapshot.promotionalEntitlement(of: "rc_promo_pro_custom", entitlementProducts: ["pro": "rc_promo_pro_custom"]) == "pro")

        // The App Store's and Google Play's pages belong to their stores' subscriptions, whichever was bought last.
        let mixed = """
            {"request_date_ms": 1767225600000, "subscriber": {"management_url": "https://apps.apple.com/account/subscriptions", "subscriptions": {
               "pro.monthly": {"store": "app_store", "purchase_date": "2025-11-01T00:00:00Z", "expires_date": "2026-02-01T00:00:00Z"},
               "web_basic": {"store": "rc_billing", "purchase_date": "2025-12-01T00:00:00Z", "expires_date": "2026-02-01T00:00:00Z"}}}}
            """
        let apple = try #require(SubscriberSnapshot(json: Data(mixed.utf8)))
        #expect(apple.subscriptions.map(\.managementURL) == ["https://apps.apple.com/account/subscriptions", nil])
    }

    @Test("BFF_IAP_PRODUCTS takes the web's products; BFF_IAP_ENTITLEMENTS and BFF_IAP_STORES are read, and each mistake refused naming its variable")
    func storesAndEntitlementsConfiguration() throws {
        func parse(_ environment: [String: String]) throws -> SubscriptionConfiguration {
            try SubscriptionConfiguration(EnvironmentReader(environment))
        }
        let defaults = try parse([:])
        #expect(defaults.stores == Set(PurchaseStore.allCases) && defaults.entitlements.isEmpty)
        #expect(PurchaseStore.allCases.map(\.rawValue) == ["app_store", "play_store", "stripe", "rc_billing", "promotional"])
        let configured = try parse([
            "BFF_IAP_PRODUCTS": "com.example.learn.pro.monthly=pro, prod_WebPro=pro, web_basic=basic",
            "BFF_IAP_ENTITLEMENTS": "pro_access=pro, basic_access = basic", "BFF_IAP_STORES": " app_store, promotional ",
        ])
        #expect(configured.products == ["com.example.learn.pro.monthly": .pro, "prod_WebPro": .pro, "web_basic": .basic])
        #expect(configured.entitlements == ["pro_access": .pro, "basic_access": .basic])
        #expect(configured.stores == [.appStore, .promotional])
        #expect(try parse(["BFF_IAP_STORES": " "]).stores == Set(PurchaseStore.allCases))

        let refused: [(String, String, String)] = [
            ("BFF_IAP_ENTITLEMENTS", "pro_access", "entitlement=basic or entitlement=pro"),
            ("BFF_IAP_ENTITLEMENTS", "pro_access=free", "entitlement=basic or entitlement=pro"),
            ("BFF_IAP_ENTITLEMENTS", "=pro", "entitlement=basic or entitlement=pro"),
            ("BFF_IAP_ENTITLEMENTS", "pro_access=gold", "\"pro_access=gold\""),
            ("BFF_IAP_STORES", "app_store,amazon", "\"amazon\""),
            ("BFF_IAP_STORES", "APP_STORE", "\"APP_STORE\""),
            ("BFF_IAP_STORES", ", ,", "at least one of app_store, play_store, stripe, rc_billing, promotional"),
            ("BFF_IAP_PRODUCTS", "prod_WebPro", "product_id=basic or product_id=pro"),
        ]
        for (variable, value, says) in refused {
            let error = #expect(throws: ConfigurationError.self, "\(variable)=\(value)") { try parse([variable: value]) }
            #expect(error?.variable == variable && error?.problem.contains(says) == true, "\(variable)=\(value): \(String(describing: error))")
        }
    }
}
