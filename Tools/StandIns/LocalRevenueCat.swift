import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// RevenueCat's REST API v1 as the BFF uses it, checking what it receives as RevenueCat does:
/// `Authorization: Bearer <secret key>` on every call, `POST /v1/receipts` with `X-Platform`
/// (`ios` or `android`) and a JSON body carrying `app_user_id` and `fetch_token`, and
/// `GET /v1/subscribers/{app_user_id}` answering the customer's snapshot (`request_date_ms`
/// strictly increasing, dates in RFC 3339, `subscriptions` keyed by product id with each one's
/// `store`, `entitlements` keyed by identifier naming the product that gives each, and one
/// `management_url`, that of the active subscription's store). Errors are RevenueCat's
/// `{code, message}`. Customers are kept in memory; tests set and change them.
///
/// Every store's subscription is served alike: the App Store's and Google Play's, the web's
/// (`rc_billing` for RevenueCat Web Billing, `stripe`), and promotional grants, which RevenueCat
/// lists as a subscription of store `promotional` whose product is `rc_promo_<entitlement>_<duration>`
/// and as the entitlement that product gives.
public final class LocalRevenueCat: Sendable {
    /// One subscription of a customer, as RevenueCat's snapshot lists it.
    public struct Subscription: Sendable, Equatable {
        public var store: String
        public var purchaseAt: Date
        public var originalPurchaseAt: Date
        public var expiresAt: Date?
        public var periodType: String
        public var sandbox: Bool
        public var unsubscribedAt: Date?
        public var billingIssueAt: Date?
        public var graceUntil: Date?
        public var refundedAt: Date?
        public var resumesAt: Date?

        public init(
            store: String = "app_store", purchaseAt: Date = Date(), originalPurchaseAt: Date? = nil, expiresAt: Date?, periodType: String = "normal",
            sandbox: Bool = false, unsubscribedAt: Date? = nil, billingIssueAt: Date? = nil, graceUntil: Date? = nil, refundedAt: Date? = nil,
            resumesAt: Date? = nil
        ) {
            self.store = store
            self.purchaseAt = purchaseAt
            self.originalPurchaseAt = originalPurchaseAt ?? purchaseAt
            self.expiresAt = expiresAt
            self.periodType = periodType
            self.sandbox = sandbox
            self.unsubscribedAt = unsubscribedAt
            self.billingIssueAt = billingIssueAt
            self.graceUntil = graceUntil
            self.refundedAt = refundedAt
            self.resumesAt = resumesAt
        }
    }

    /// A receipt `POST /receipts` accepts: the subscription it adds to the customer who posts it.
    public struct Receipt: Sendable {
        public var productID: String
        public var platform: String
        public var subscription: Subscription

        public init(productID: String, platform: String, subscription: Subscription) {
            self.productID = productID
            self.platform = platform
            self.subscription = subscription
        }
    }

    /// A receipt as it was posted.
    public struct PostedReceipt: Sendable, Equatable {
        public let appUserID: String
        public let platform: String
        public let fetchToken: String
        public let productID: String?

        public init(appUserID: String, platform: String, fetchToken: String, productID: String?) {
            self.appUserID = appUserID
            self.platform = platform
            self.fetchToken = fetchToken
            self.productID = productID
        }
    }

    /// RevenueCat's durations of a promotional grant (`POST …/entitlements/{id}/promotional`) and
    /// how long each lasts.
    public static let promotionalDurations: [String: TimeInterval] = [
        "daily": 86_400, "three_day": 3 * 86_400, "weekly": 7 * 86_400, "two_week": 14 * 86_400, "monthly": 31 * 86_400,
        "two_month": 61 * 86_400, "three_month": 92 * 86_400, "six_month": 183 * 86_400, "yearly": 365 * 86_400,
        "lifetime": 200 * 365 * 86_400,
    ]

    /// The management URLs RevenueCat gives for the App Store's and Google Play's subscriptions.
    public static let appStoreManagementURL = "https://apps.apple.com/account/subscriptions"
    public static let playStoreManagementURL = "https://play.google.com/store/account/subscriptions"

    public let apiKey: String
    /// Entitlement identifier → the products that give it, as the project's entitlements are set up
    /// in RevenueCat; a promotional grant's product gives its entitlement besides.
    public let entitlements: [String: Set<String>]
    /// Where RevenueCat Web Billing's customer portal is, the management URL of an `rc_billing` subscription.
    public let webBillingPortalURL: String
    /// The Stripe customer portal configured in RevenueCat, the management URL of a `stripe`
    /// subscription; nil when none is configured (RevenueCat then gives none).
    public let stripePortalURL: String?
    /// How long each answer takes (the benchmark's RevenueCat answers in 30 ms).
    public let latency: Duration
    /// Without a registered receipt, accept any and grant a month of this product (development, the contract run).
    public let acceptAnyReceipt: (productID: String, platform: String)?
    public let violations = NIOLockedValueBox<[String]>([])
    public let posted = NIOLockedValueBox<[PostedReceipt]>([])
    /// `GET /subscribers` calls per app user id.
    public let subscriberCalls = NIOLockedValueBox<[String: Int]>([:])
    /// When each `GET /subscribers` call came, per app user id.
    public let subscriberCallTimes = NIOLockedValueBox<[String: [Date]]>([:])
    private let customers = NIOLockedValueBox<[String: [String: Subscription]]>([:])
    private let receipts = NIOLockedValueBox<[String: Receipt]>([:])
    /// Receipts that hold no purchase, by token: their platform.
    private let emptyReceipts = NIOLockedValueBox<[String: String]>([:])
    /// A promotional grant's product → the entitlement it gives.
    private let promotionalProducts = NIOLockedValueBox<[String: String]>([:])
    private let scriptedAnswers = NIOLockedValueBox<[String: [ScriptedAnswer]]>([:])
    private let lastRequestMillis = NIOLockedValueBox<Int64>(0)

    public init(
        apiKey: String = "sk_local_revenuecat", latency: Duration = .zero, acceptAnyReceipt: (productID: String, platform: String)? = nil,
        entitlements: [String: Set<String>] = [:], webBillingPortalURL: String = "https://billing.revenuecat.invalid/customer-portal",
        stripePortalURL: String? = nil
    ) {
        self.apiKey = apiKey
        self.latency = latency
        self.acceptAnyReceipt = acceptAnyReceipt
        self.entitlements = entitlements
        self.webBillingPortalURL = webBillingPortalURL
        self.stripePortalURL = stripePortalURL
    }

    // MARK: What tests set

    /// Replaces the customer's subscriptions (product id → subscription).
    public func set(_ appUserID: String, _ subscriptions: [String: Subscription]) {
        customers.withLockedValue { $0[appUserID] = subscriptions }
    }

    /// Changes one subscription of the customer.
    public func update(_ appUserID: String, product: String, _ change: (inout Subscription) -> Void) {
        customers.withLockedValue { customers in
            guard var subscription = customers[appUserID]?[product] else { return }
            change(&subscription)
            customers[appUserID]?[product] = subscription
        }
    }

    /// Moves a subscription to another customer, as a restore on another account does (TRANSFER).
    public func transfer(product: String, from: String, to: String) {
        customers.withLockedValue { customers in
            guard let subscription = customers[from]?.removeValue(forKey: product) else { return }
            customers[to, default: [:]][product] = subscription
        }
    }

    public func subscriptions(of appUserID: String) -> [String: Subscription] {
        customers.withLockedValue { $0[appUserID] ?? [:] }
    }

    /// A receipt `POST /receipts` accepts as `token`; any other is refused as RevenueCat refuses an invalid one.
    public func register(receipt token: String, _ receipt: Receipt) {
        receipts.withLockedValue { $0[token] = receipt }
    }

    /// A valid receipt of `platform`'s store that holds no subscription (a restore on a device that
    /// bought nothing there): `POST /receipts` accepts it and answers the customer as they are.
    public func register(emptyReceipt token: String, platform: String) {
        emptyReceipts.withLockedValue { $0[token] = platform }
    }

    /// Grants the customer `entitlement` for `duration` (a key of `promotionalDurations`), as RevenueCat's
    /// `POST /subscribers/{id}/entitlements/{entitlement}/promotional` and its dashboard do: a
    /// subscription of store `promotional` whose product is `rc_promo_<entitlement>_<duration>`, which
    /// gives the entitlement. Answers the product.
    @discardableResult
    public func grant(_ appUserID: String, entitlement: String, duration: String = "monthly", from start: Date = Date()) -> String {
        let product = "rc_promo_\(entitlement)_\(duration)"
        let length = Self.promotionalDurations[duration] ?? 31 * 86_400
        promotionalProducts.withLockedValue { $0[product] = entitlement }
        customers.withLockedValue { customers in
            customers[appUserID, default: [:]][product] = Subscription(
                store: "promotional", purchaseAt: start, expiresAt: start.addingTimeInterval(length))
        }
        return product
    }

    /// Answers the next calls of `operation` (`receipts` or `subscribers`) this way, in order,
    /// before answering normally again.
    public func script(_ operation: String, _ answers: [ScriptedAnswer]) {
        scriptedAnswers.withLockedValue { $0[operation, default: []] += answers }
    }

    public func calls(for appUserID: String) -> Int { subscriberCalls.withLockedValue { $0[appUserID] ?? 0 } }

    // MARK: The API

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/v1/receipts") { [self] request, _ -> Response in
            if let refusal = authorize(request) { return refusal }
            try? await Task.sleep(for: latency)
            return try await postReceipt(request)
        }
        router.get("/v1/subscribers/:id") { [self] request, context -> Response in
            if let refusal = authorize(request) { return refusal }
            try? await Task.sleep(for: latency)
            guard let id = context.parameters.get("id")?.removingPercentEncoding, !id.isEmpty else { return error(404, 7259, "Subscriber not found.") }
            subscriberCalls.withLockedValue { $0[id, default: 0] += 1 }
            subscriberCallTimes.withLockedValue { $0[id, default: []].append(Date()) }
            if let answer = nextScripted("subscribers") { return try await scripted(answer) { self.snapshot(of: id) } }
            return snapshot(of: id)
        }
        router.delete("/v1/subscribers/:id") { [self] request, context -> Response in
            if let refusal = authorize(request) { return refusal }
            try? await Task.sleep(for: latency)
            guard let id = context.parameters.get("id")?.removingPercentEncoding, !id.isEmpty else { return error(404, 7259, "Subscriber not found.") }
            if let answer = nextScripted("delete") { return try await scripted(answer) { self.deleted(id) } }
            return deleted(id)
        }
        return router
    }

    /// Customers deleted through the API, in order.
    public let deletedCustomers = NIOLockedValueBox<[String]>([])

    private func deleted(_ id: String) -> Response {
        let known = customers.withLockedValue { $0.removeValue(forKey: id) != nil }
        guard known else { return error(404, 7259, "Subscriber not found.") }
        deletedCustomers.withLockedValue { $0.append(id) }
        let body = #"{"app_user_id":"\#(id)","deleted":true}"#
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    private func authorize(_ request: Request) -> Response? {
        guard request.headers[.authorization] == "Bearer \(apiKey)" else {
            violations.withLockedValue { $0.append("a request without the secret API key") }
            return error(401, 7225, "Invalid API Key.")
        }
        return nil
    }

    private func nextScripted(_ operation: String) -> ScriptedAnswer? {
        scriptedAnswers.withLockedValue { scripted in
            guard var answers = scripted[operation], !answers.isEmpty else { return nil }
            let answer = answers.removeFirst()
            scripted[operation] = answers
            return answer
        }
    }

    private func refuse(_ why: String) -> Response {
        violations.withLockedValue { $0.append(why) }
        return error(400, 7000, why)
    }

    private func error(_ status: Int, _ code: Int, _ message: String) -> Response {
        let body = #"{"code":\#(code),"message":"\#(message)"}"#
        return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    private func postReceipt(_ request: Request) async throws -> Response {
        guard let platform = HTTPField.Name("X-Platform").flatMap({ request.headers[$0] }), ["ios", "android"].contains(platform) else {
            return refuse("X-Platform must be ios or android")
        }
        guard request.headers[.contentType]?.hasPrefix("application/json") == true else { return refuse("content type") }
        let body = try await request.body.collect(upTo: 1 << 20)
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
            let appUserID = object["app_user_id"] as? String, !appUserID.isEmpty,
            let token = object["fetch_token"] as? String, !token.isEmpty
        else { return refuse("the body must carry app_user_id and fetch_token") }
        let productID = object["product_id"] as? String
        posted.withLockedValue { $0.append(PostedReceipt(appUserID: appUserID, platform: platform, fetchToken: token, productID: productID)) }
        if let answer = nextScripted("receipts") { return try await scripted(answer) { self.snapshot(of: appUserID) } }
        if emptyReceipts.withLockedValue({ $0[token] }) == platform { return snapshot(of: appUserID) }
        let known = receipts.withLockedValue { $0[token] }
        let receipt =
            known
            ?? acceptAnyReceipt.map { any in
                Receipt(
                    productID: productID ?? any.productID, platform: platform,
                    subscription: Subscription(store: platform == "ios" ? "app_store" : "play_store", expiresAt: Date().addingTimeInterval(30 * 86_400)))
            }
        guard let receipt, receipt.platform == platform else {
            // RevenueCat's answer when the store does not know the receipt.
            return error(400, 7103, "The receipt is not valid.")
        }
        customers.withLockedValue { customers in
            // A receipt already held by another customer moves to this one (RevenueCat's default transfer behaviour).
            for (other, products) in customers where other != appUserID && products[receipt.productID] == receipt.subscription {
                customers[other]?[receipt.productID] = nil
            }
            customers[appUserID, default: [:]][receipt.productID] = receipt.subscription
        }
        return snapshot(of: appUserID)
    }

    /// The customer's snapshot, as `GET /subscribers` and `POST /receipts` answer it.
    private func snapshot(of appUserID: String) -> Response {
        let now = Date()
        let millis = lastRequestMillis.withLockedValue { last in
            last = max(last + 1, Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
            return last
        }
        let held = customers.withLockedValue { $0[appUserID] ?? [:] }
        var subscriptions: [String: Any] = [:]
        for (product, subscription) in held {
            subscriptions[product] = [
                "store": subscription.store,
                "purchase_date": Self.date(subscription.purchaseAt),
                "original_purchase_date": Self.date(subscription.originalPurchaseAt),
                "expires_date": Self.date(subscription.expiresAt),
                "period_type": subscription.periodType,
                "is_sandbox": subscription.sandbox,
                "unsubscribe_detected_at": Self.date(subscription.unsubscribedAt),
                "billing_issues_detected_at": Self.date(subscription.billingIssueAt),
                "grace_period_expires_date": Self.date(subscription.graceUntil),
                "refunded_at": Self.date(subscription.refundedAt),
                "auto_resume_date": Self.date(subscription.resumesAt),
                "ownership_type": "PURCHASED",
                "store_transaction_id": "\(Int64(subscription.purchaseAt.timeIntervalSince1970 * 1000))",
            ] as [String: Any]
        }
        let object: [String: Any] = [
            "request_date": Self.date(Date(timeIntervalSince1970: Double(millis) / 1000)),
            "request_date_ms": millis,
            "subscriber": [
                "original_app_user_id": appUserID,
                "first_seen": Self.date(now),
                "management_url": managementURL(of: held, at: now).map { $0 as Any } ?? NSNull(),
                "subscriptions": subscriptions,
                "entitlements": entitlementObjects(of: held),
                "non_subscriptions": [String: Any](),
                "other_purchases": [String: Any](),
            ] as [String: Any],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The subscriber's one management URL: that of the store of the subscription active and bought
    /// last (of the latest bought when none is active); none for a promotional grant, which has
    /// nothing to manage, nor for Stripe without a customer portal.
    private func managementURL(of held: [String: Subscription], at now: Date) -> String? {
        func active(_ subscription: Subscription) -> Int {
            let paidUp = subscription.expiresAt.map { $0 > now } ?? true
            let inGrace = subscription.graceUntil.map { $0 > now } ?? false
            return subscription.refundedAt == nil && (paidUp || inGrace) ? 1 : 0
        }
        let latest = held.filter { $0.value.store != "promotional" }
            .max { a, b in (active(a.value), a.value.purchaseAt, a.key) < (active(b.value), b.value.purchaseAt, b.key) }
        switch latest?.value.store {
        case "app_store": return Self.appStoreManagementURL
        case "play_store": return Self.playStoreManagementURL
        case "rc_billing": return webBillingPortalURL
        case "stripe": return stripePortalURL
        default: return nil
        }
    }

    /// `subscriber.entitlements`: each entitlement one of the customer's products gives, naming the
    /// product whose access lasts longest (one without an end, longest of all), with its dates.
    private func entitlementObjects(of held: [String: Subscription]) -> [String: Any] {
        let promotional = promotionalProducts.withLockedValue { $0 }
        var givers: [String: [(product: String, subscription: Subscription)]] = [:]
        for (product, subscription) in held {
            for (identifier, products) in entitlements where products.contains(product) {
                givers[identifier, default: []].append((product, subscription))
            }
            if subscription.store == "promotional", let identifier = promotional[product] {
                givers[identifier, default: []].append((product, subscription))
            }
        }
        var objects: [String: Any] = [:]
        for (identifier, candidates) in givers {
            guard
                let giver = candidates.max(by: { a, b in
                    (a.subscription.expiresAt ?? .distantFuture, a.product) < (b.subscription.expiresAt ?? .distantFuture, b.product)
                })
            else { continue }
            objects[identifier] = [
                "product_identifier": giver.product,
                "purchase_date": Self.date(giver.subscription.purchaseAt),
                "expires_date": Self.date(giver.subscription.expiresAt),
                "grace_period_expires_date": Self.date(giver.subscription.graceUntil),
            ] as [String: Any]
        }
        return objects
    }

    /// RevenueCat's form: RFC 3339 in UTC, whole seconds. A format style is a value, made once (a
    /// formatter per date cost the benchmark's stand-in more CPU than the server it measured).
    private static let format = Date.ISO8601FormatStyle()

    private static func date(_ date: Date?) -> Any {
        guard let date else { return NSNull() }
        return format.format(date)
    }
}
