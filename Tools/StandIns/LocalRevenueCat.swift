import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// RevenueCat's REST API v1 as the BFF uses it, checking what it receives as RevenueCat does:
/// `Authorization: Bearer <secret key>` on every call, `POST /v1/receipts` with `X-Platform`
/// (`ios` or `android`) and a JSON body carrying `app_user_id` and `fetch_token`, and
/// `GET /v1/subscribers/{app_user_id}` answering the customer's snapshot (`request_date_ms`
/// strictly increasing, dates in RFC 3339, `subscriptions` keyed by product id). Errors are
/// RevenueCat's `{code, message}`. Customers are kept in memory; tests set and change them.
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

    public let apiKey: String
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
    private let scriptedAnswers = NIOLockedValueBox<[String: [ScriptedAnswer]]>([:])
    private let lastRequestMillis = NIOLockedValueBox<Int64>(0)

    public init(apiKey: String = "sk_local_revenuecat", latency: Duration = .zero, acceptAnyReceipt: (productID: String, platform: String)? = nil) {
        self.apiKey = apiKey
        self.latency = latency
        self.acceptAnyReceipt = acceptAnyReceipt
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
        var subscriptions: [String: Any] = [:]
        for (product, subscription) in customers.withLockedValue({ $0[appUserID] ?? [:] }) {
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
        let management =
            subscriptions.values.contains { ($0 as? [String: Any])?["store"] as? String == "play_store" }
            ? "https://play.google.com/store/account/subscriptions" : "https://apps.apple.com/account/subscriptions"
        let object: [String: Any] = [
            "request_date": Self.date(Date(timeIntervalSince1970: Double(millis) / 1000)),
            "request_date_ms": millis,
            "subscriber": [
                "original_app_user_id": appUserID,
                "first_seen": Self.date(now),
                "management_url": subscriptions.isEmpty ? NSNull() : management,
                "subscriptions": subscriptions,
                "entitlements": [String: Any](),
                "non_subscriptions": [String: Any](),
                "other_purchases": [String: Any](),
            ] as [String: Any],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// RevenueCat's form: RFC 3339 in UTC, whole seconds. A format style is a value, made once (a
    /// formatter per date cost the benchmark's stand-in more CPU than the server it measured).
    private static let format = Date.ISO8601FormatStyle()

    private static func date(_ date: Date?) -> Any {
        guard let date else { return NSNull() }
        return format.format(date)
    }
}
