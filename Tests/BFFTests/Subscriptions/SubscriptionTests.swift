import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// Subscriptions end to end: the app configured against a local RevenueCat that checks what it
/// receives, a real database, and the in-process job worker running the re-syncs.
@Suite("Subscriptions", .needsDatabase, .timeLimit(.minutes(3)))
struct SubscriptionTests {
    let database: DatabaseURL
    static let basic = "com.example.learn.basic.monthly"
    static let pro = "com.example.learn.pro.monthly"
    static let webhookAuthorization = "Bearer rc-webhook-secret-0123456789"

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    func withRevenueCat<T: Sendable>(
        _ revenueCat: LocalRevenueCat, environment: [String: String] = [:], logs: LogCapture = LogCapture(),
        _ body: @escaping @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let database = database
        return try await serveHTTP1(revenueCat.router, logger: TestEnvironment.quietLogger) { base in
            let app = try await makeTestApp(
                database: database,
                environment: [
                    "BFF_REVENUECAT_BASE_URL": "\(base)/v1", "BFF_REVENUECAT_API_KEY": revenueCat.apiKey,
                    "BFF_REVENUECAT_WEBHOOK_AUTH": Self.webhookAuthorization, "BFF_IAP_PRODUCTS": "\(Self.basic)=basic,\(Self.pro)=pro",
                    "BFF_REVENUECAT_SYNC_RATE": "100", "BFF_REVENUECAT_TIMEOUT": "2", "BFF_JOBS_POLL_INTERVAL_MS": "100",
                ].merging(environment) { $1 }, logs: logs)
            return try await app.live { client in try await body(client) }
        }
    }

    func subscription(_ client: any TestClientProtocol, _ learner: Learner) async throws -> [String: Any] {
        let response = try await client.call(.get, "/api/v1/me/subscription", as: learner)
        #expect(response.status == .ok, "\(response.text)")
        return response.json
    }

    func plan(_ client: any TestClientProtocol, _ learner: Learner) async throws -> String? {
        try await subscription(client, learner)["plan"] as? String
    }

    func verify(_ client: any TestClientProtocol, _ learner: Learner, receipt: String, product: String = pro, platform: String = "ios") async throws
        -> TestResponse
    {
        try await client.call(
            .post, "/api/v1/iap/verify", as: learner, json: #"{"platform":"\#(platform)","product_id":"\#(product)","receipt":"\#(receipt)"}"#)
    }

    func webhook(_ client: any TestClientProtocol, _ body: String, authorization: String? = webhookAuthorization) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let authorization { headers[.authorization] = authorization }
        return try await client.execute(uri: RevenueCatInbox.path, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    static func event(_ id: String, _ type: String, user: UUID, extra: String = "") -> String {
        let fields = extra.isEmpty ? "" : ", \(extra)"
        return """
            {"api_version": "1.0", "event": {"id": "\(id)", "type": "\(type)", "app_user_id": "\(user.uuidString.lowercased())",
             "aliases": ["$RCAnonymousID:0123456789abcdef"], "environment": "PRODUCTION", "event_timestamp_ms": 1767225600000,
             "product_id": "\(pro)", "subscriber_attributes": {"$email": {"value": "student@example.com"}}\(fields)}}
            """
    }

    func scalar<T: PostgresDecodable & Sendable>(_ sql: PostgresQuery, as type: T.Type = Int.self) async throws -> T? {
        try await database.withClient { client in
            for try await value in try await client.query(sql).decode(T.self) { return value }
            return nil
        }
    }

    /// Waits until every event of the inbox has had its users' re-syncs (settled as the expiry job does).
    func inboxDone() async throws -> Bool {
        try await eventually(within: .seconds(30), every: .milliseconds(100)) {
            try await database.withClient { client in
                _ = try await SubscriptionSync.settleInbox(client, logger: TestEnvironment.quietLogger)
                for try await count in try await client.query("SELECT count(*)::int FROM revenuecat_events WHERE processed_at IS NULL").decode(Int.self) {
                    return count == 0
                }
                return false
            }
        }
    }

    static func month(_ from: Date = Date()) -> Date { from.addingTimeInterval(30 * 86_400) }

    @Test("verify: the receipt goes to RevenueCat for the caller, the canonical state is stored, the receipt only as its hash; /me and restore agree")
    func verifyPurchase() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        let receipt = "MIIT8gYJKoZIhvcNAQcCoIIT4zCCE98CAQExCzAJBgUrDgMCGgUAMIIDkwYJKoZIhvcNAQcBoIIDhASCA4AxggN8MAoCAQgCAQEEAhYAMAoCARQCAQEEAgwA"
        revenueCat.register(receipt: receipt, .init(productID: Self.pro, platform: "ios", subscription: .init(expiresAt: Self.month())))
        let logs = LogCapture()
        try await withRevenueCat(revenueCat, logs: logs) { client async throws in
            let response = try await verify(client, learner, receipt: receipt)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.json["plan"] as? String == "pro" && response.json["status"] as? String == "active")
            let rows = try #require(response.json["subscriptions"] as? [[String: Any]])
            #expect(rows.count == 1 && rows[0]["product_id"] as? String == Self.pro && rows[0]["platform"] as? String == "ios")
            #expect(rows[0]["will_renew"] as? Bool == true && rows[0]["management_url"] as? String == "https://apps.apple.com/account/subscriptions")

            let posted = revenueCat.posted.withLockedValue { $0 }
            #expect(posted == [.init(appUserID: learner.id.uuidString.lowercased(), platform: "ios", fetchToken: receipt, productID: Self.pro)])
            #expect(revenueCat.violations.withLockedValue { $0 }.isEmpty)
            let hash = try await scalar("SELECT raw_payload_hash FROM iap_receipts WHERE user_id = \(learner.id)", as: Data.self)
            #expect(hash == Data(SHA256.hash(data: Data(receipt.utf8))))
            let stored = try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id) AND status = 'active'")
            #expect(stored == 1)

            let me = try await client.call(.get, "/api/v1/me", as: learner)
            #expect(me.json["plan"] as? String == "pro")
            #expect((me.json["subscription"] as? [String: Any])?["product_id"] as? String == Self.pro)
            // Restore is the same call: the same receipt again changes nothing but the sync time.
            let restored = try await verify(client, learner, receipt: receipt)
            #expect(restored.status == .ok && restored.json["plan"] as? String == "pro")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id)") == 1)
            // Another user's plan is untouched.
            #expect(try await plan(client, other) == "free")
            #expect(try await client.call(.get, "/api/v1/me", as: other).json["subscription"] == nil)
        }
        #expect(!logs.all.contains { $0.contains(receipt) || $0.contains(String(receipt.prefix(24))) })
    }

    @Test("verify: a receipt RevenueCat refuses is 422 invalid_receipt and nothing is stored; a malformed one never leaves the server")
    func invalidReceipt() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        try await withRevenueCat(revenueCat) { client async throws in
            let refused = try await verify(client, learner, receipt: "not-a-known-receipt")
            #expect(refused.status == .unprocessableContent && refused.errorCode == "invalid_receipt", "\(refused.text)")
            let malformed = try await verify(client, learner, receipt: "spaces are not receipt characters")
            #expect(malformed.status == .unprocessableContent && malformed.errorCode == "validation_failed")
            #expect(revenueCat.posted.withLockedValue { $0.count } == 1)
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id)") == 0)
            #expect(try await plan(client, learner) == "free")
        }
    }

    @Test(
        "verify: RevenueCat rate limiting, failing, timing out, answering garbage or dropping the connection is 503 store_unavailable with Retry-After, nothing half-written; a purchase RevenueCat holds is synced after"
    )
    func verifyFaults() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let receipt = "receipt-of-a-real-purchase-0001"
        revenueCat.register(receipt: receipt, .init(productID: Self.basic, platform: "android", subscription: .init(store: "play_store", expiresAt: Self.month())))
        try await withRevenueCat(revenueCat, environment: ["BFF_JOBS_CONCURRENCY": "0"]) { client async throws in
            let faults: [(ScriptedAnswer, String?)] = [
                (.refuse(status: 429, reason: #"{"code":7014,"message":"Rate limit exceeded"}"#, retryAfter: 7), "7"),
                (.refuse(status: 500, reason: #"{"code":7110,"message":"Internal error"}"#), nil),
                (.garbage(status: 502), nil), (.stall(.seconds(4)), nil), (.drop, nil),
            ]
            for (fault, retryAfter) in faults {
                revenueCat.script("receipts", [fault])
                let response = try await verify(client, learner, receipt: receipt, product: Self.basic, platform: "android")
                #expect(response.status == .serviceUnavailable && response.errorCode == "store_unavailable", "\(fault): \(response.text)")
                let header = response.headers[.retryAfter]
                #expect(retryAfter.map { header == $0 } ?? (header != nil), "\(fault): Retry-After \(header ?? "none")")
            }
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id)") == 0)
            #expect(try await scalar("SELECT count(*)::int FROM jobs WHERE user_id = \(learner.id)") == 0)
            // RevenueCat took the receipt but its state could not be read back: 503, nothing stored, and a re-sync is queued.
            revenueCat.script("subscribers", [.garbage(status: 200)])
            let halfway = try await verify(client, learner, receipt: receipt, product: Self.basic, platform: "android")
            #expect(halfway.status == .serviceUnavailable && halfway.errorCode == "store_unavailable")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id)") == 0)
            #expect(try await scalar("SELECT count(*)::int FROM jobs WHERE user_id = \(learner.id) AND kind = 'iap.sync' AND state = 'available'") == 1)
            #expect(try await plan(client, learner) == "free")
        }
        // The queued re-sync stores the purchase even if the app never asks again.
        try await withRevenueCat(revenueCat) { client async throws in
            #expect(try await eventually { try await plan(client, learner) == "basic" })
        }
    }

    @Test("webhook: a wrong or missing Authorization is 401 and stores nothing; no JSON is 400, no event id or type 422; neither logs the body")
    func webhookRefusals() async throws {
        let revenueCat = LocalRevenueCat()
        let user = UUID()
        let logs = LogCapture()
        try await withRevenueCat(revenueCat, logs: logs) { client async throws in
            for authorization in [nil, "Bearer rc-webhook-secret-0123456788", "rc-webhook-secret-0123456789", "bearer rc-webhook-secret-0123456789"] {
                let refused = try await webhook(client, Self.event("evt-auth", "RENEWAL", user: user), authorization: authorization)
                #expect(refused.status == .unauthorized && refused.errorCode == "webhook_unauthorized", "\(authorization ?? "none")")
            }
            // Unauthorised garbage is still 401: the body is not read without the credential.
            #expect(try await webhook(client, "{not json", authorization: nil).status == .unauthorized)
            let garbage = try await webhook(client, "{not json: student@example.com")
            #expect(garbage.status == .badRequest && garbage.errorCode == "invalid_json", "\(garbage.text)")
            for body in [
                #"{"api_version": "1.0", "event": {"type": "RENEWAL", "app_user_id": "student@example.com"}}"#,
                #"{"api_version": "1.0", "event": {"id": "evt-1", "app_user_id": "student@example.com"}}"#,
                #"{"api_version": "1.0", "event": {"id": "", "type": "RENEWAL"}}"#, #"{"api_version": "1.0"}"#,
            ] {
                let invalid = try await webhook(client, body)
                #expect(invalid.status == .unprocessableContent && invalid.errorCode == "validation_failed", "\(body): \(invalid.text)")
            }
            #expect(try await scalar("SELECT count(*)::int FROM revenuecat_events") == 0)
        }
        #expect(!logs.all.contains { $0.contains("student@example.com") })
    }

    @Test("webhook: the same event twice is one event and one re-sync; an unknown type is acknowledged and kept; events naming no user are kept as done")
    func webhookDuplicates() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        revenueCat.set(learner.id.uuidString.lowercased(), [Self.pro: .init(expiresAt: Self.month())])
        try await withRevenueCat(revenueCat) { client async throws in
            let first = try await webhook(client, Self.event("evt-dup", "INITIAL_PURCHASE", user: learner.id))
            #expect(first.status == .ok && first.json["status"] as? String == "stored", "\(first.text)")
            let again = try await webhook(client, Self.event("evt-dup", "INITIAL_PURCHASE", user: learner.id))
            #expect(again.status == .ok && again.json["status"] as? String == "duplicate")
            let unknown = try await webhook(client, Self.event("evt-new-kind", "SUBSCRIPTION_EXTENDED_BY_MAGIC", user: learner.id))
            #expect(unknown.status == .ok && unknown.json["status"] as? String == "stored")
            let nobody = try await webhook(client, #"{"event": {"id": "evt-anon", "type": "RENEWAL", "app_user_id": "$RCAnonymousID:abc"}}"#)
            #expect(nobody.status == .ok)
            #expect(try await inboxDone())
            #expect(try await plan(client, learner) == "pro")
            #expect(try await scalar("SELECT count(*)::int FROM revenuecat_events") == 3)
            #expect(try await scalar("SELECT type FROM revenuecat_events WHERE event_id = 'evt-new-kind'", as: String.self) == "SUBSCRIPTION_EXTENDED_BY_MAGIC")
            // Two events within one window: one RevenueCat call (the second joined the first's queued job) or two at most.
            #expect((1...2).contains(revenueCat.calls(for: learner.id.uuidString.lowercased())))
        }
    }

    @Test("webhooks in any order, repeated, converge on RevenueCat's state; an older snapshot never overwrites a newer one")
    func anyOrder() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let id = learner.id.uuidString.lowercased()
        let now = Date()
        // The life the events tell: bought, renewed, a billing issue, auto-renew turned off; its end still ahead.
        revenueCat.set(id, [Self.pro: .init(purchaseAt: now.addingTimeInterval(-40 * 86_400), expiresAt: now.addingTimeInterval(5 * 86_400), unsubscribedAt: now)])
        let events = ["INITIAL_PURCHASE", "RENEWAL", "BILLING_ISSUE", "CANCELLATION", "EXPIRATION"].enumerated().map { index, type in
            Self.event("evt-order-\(index)", type, user: learner.id)
        }
        try await withRevenueCat(revenueCat) { client async throws in
            for body in (events + events).shuffled() {
                #expect(try await webhook(client, body).status == .ok)
            }
            #expect(try await inboxDone())
            let state = try await subscription(client, learner)
            #expect(state["plan"] as? String == "pro" && state["status"] as? String == "canceled", "\(state)")
            #expect(((state["subscriptions"] as? [[String: Any]])?.first?["will_renew"]) as? Bool == false)
            // Ten deliveries within a few seconds: re-syncs coalesce per 10-second window.
            #expect(revenueCat.calls(for: id) <= 3, "\(revenueCat.calls(for: id)) calls")
        }
        // The store, read directly: a snapshot taken before the one applied changes nothing.
        let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2)))
        try await Commands.withDatabase(pool.client) { _ async throws in
            let store = SubscriptionStore(
                database: pool, configuration: .init(apiKey: nil, baseURL: "http://127.0.0.1:1", products: [Self.pro: .pro]),
                logger: TestEnvironment.quietLogger)
            let stale = SubscriberSnapshot(takenAt: now.addingTimeInterval(-3_600), subscriptions: [])
            #expect(try await store.apply(stale, userID: learner.id, asked: now))
            #expect(try await store.entitlement(userID: learner.id).plan == .pro)
            #expect(try await store.view(userID: learner.id).subscriptions.count == 1)
            #expect(try await store.apply(stale, userID: UUID(), asked: now) == false)
        }
    }

    @Test("TRANSFER: the subscription leaves the first user and reaches the second, whichever re-sync runs first")
    func transfer() async throws {
        let revenueCat = LocalRevenueCat()
        let first = try await Learner.make(database: database)
        let second = try await Learner.make(database: database)
        let (a, b) = (first.id.uuidString.lowercased(), second.id.uuidString.lowercased())
        revenueCat.set(a, [Self.pro: .init(expiresAt: Self.month())])
        try await withRevenueCat(revenueCat) { client async throws in
            #expect(try await webhook(client, Self.event("evt-buy", "INITIAL_PURCHASE", user: first.id)).status == .ok)
            #expect(try await inboxDone())
            #expect(try await plan(client, first) == "pro")
            revenueCat.transfer(product: Self.pro, from: a, to: b)
            // RevenueCat sends TRANSFER to the receiving user only, naming both sides.
            let transfer = #"{"event": {"id": "evt-transfer", "type": "TRANSFER", "app_user_id": "\#(b)", "transferred_from": ["\#(a)"], "transferred_to": ["\#(b)"]}}"#
            #expect(try await webhook(client, transfer).status == .ok)
            #expect(try await inboxDone())
            #expect(try await plan(client, first) == "free")
            #expect(try await plan(client, second) == "pro")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(first.id)") == 0)
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(second.id)") == 1)
        }
    }

    @Test("refund, sandbox purchases in production (unless an allow-listed tester), and Basic → Pro")
    func statesFromSnapshots() async throws {
        let revenueCat = LocalRevenueCat()
        let refunded = try await Learner.make(database: database)
        let sandbox = try await Learner.make(database: database)
        let tester = try await Learner.make(database: database)
        let upgrader = try await Learner.make(database: database)
        let now = Date()
        revenueCat.set(refunded.id.uuidString.lowercased(), [Self.pro: .init(expiresAt: Self.month(), refundedAt: now)])
        for learner in [sandbox, tester] {
            revenueCat.set(learner.id.uuidString.lowercased(), [Self.pro: .init(expiresAt: Self.month(), sandbox: true)])
        }
        revenueCat.set(upgrader.id.uuidString.lowercased(), [Self.basic: .init(expiresAt: Self.month())])
        try await withRevenueCat(revenueCat, environment: ["BFF_IAP_SANDBOX_USERS": tester.id.uuidString]) { client async throws in
            for (index, learner) in [refunded, sandbox, tester, upgrader].enumerated() {
                #expect(try await webhook(client, Self.event("evt-state-\(index)", "INITIAL_PURCHASE", user: learner.id)).status == .ok)
            }
            #expect(try await inboxDone())
            let refund = try await subscription(client, refunded)
            #expect(refund["plan"] as? String == "free" && refund["status"] as? String == "expired", "\(refund)")
            #expect(try await plan(client, sandbox) == "free")
            #expect(try await plan(client, tester) == "pro")
            #expect(try await plan(client, upgrader) == "basic")
            // The upgrade: Basic ends now, Pro starts (a PRODUCT_CHANGE event).
            revenueCat.set(
                upgrader.id.uuidString.lowercased(),
                [Self.basic: .init(expiresAt: now.addingTimeInterval(-1), unsubscribedAt: now), Self.pro: .init(purchaseAt: now, expiresAt: Self.month())])
            #expect(try await webhook(client, Self.event("evt-upgrade", "PRODUCT_CHANGE", user: upgrader.id)).status == .ok)
            #expect(try await eventually { try await plan(client, upgrader) == "pro" })
            let rows = try await subscription(client, upgrader)["subscriptions"] as? [[String: Any]]
            #expect(Set(rows?.compactMap { "\($0["product_id"] ?? "")=\($0["status"] ?? "")" } ?? []) == ["\(Self.basic)=expired", "\(Self.pro)=active"])
        }
    }

    @Test("a re-sync through RevenueCat failing, rate limiting, answering garbage and dropping the connection is retried until it lands; nothing lost")
    func resyncFaults() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        revenueCat.set(learner.id.uuidString.lowercased(), [Self.pro: .init(expiresAt: Self.month())])
        revenueCat.script(
            "subscribers",
            [.refuse(status: 429, reason: #"{"code":7014,"message":"Rate limit"}"#, retryAfter: 1), .refuse(status: 503, reason: "{}"), .garbage(status: 200), .drop])
        try await withRevenueCat(revenueCat) { client async throws in
            #expect(try await webhook(client, Self.event("evt-flaky", "RENEWAL", user: learner.id)).status == .ok)
            #expect(try await eventually(within: .seconds(60), every: .milliseconds(200)) { try await plan(client, learner) == "pro" })
            #expect(try await inboxDone())
            let attempts = try await scalar("SELECT attempt FROM jobs WHERE user_id = \(learner.id) AND kind = 'iap.sync' AND state = 'completed'")
            #expect(attempts == 5)
        }
    }

    @Test("a renewal whose webhook never came is found by the expiry job before the learner is cut off")
    func lostRenewal() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let id = learner.id.uuidString.lowercased()
        let now = Date()
        revenueCat.set(id, [Self.pro: .init(purchaseAt: now.addingTimeInterval(-30 * 86_400), expiresAt: now.addingTimeInterval(120))])
        try await withRevenueCat(revenueCat, environment: ["BFF_IAP_EXPIRY_INTERVAL": "10"]) { client async throws in
            #expect(try await webhook(client, Self.event("evt-first", "INITIAL_PURCHASE", user: learner.id)).status == .ok)
            #expect(try await inboxDone())
            let before = try #require(try await subscription(client, learner)["access_until"] as? String)
            // The store renews; no webhook reaches the server.
            revenueCat.update(id, product: Self.pro) { $0.expiresAt = now.addingTimeInterval(30 * 86_400) }
            #expect(
                try await eventually(within: .seconds(40), every: .milliseconds(250)) {
                    try await subscription(client, learner)["access_until"] as? String != before
                })
            #expect(try await plan(client, learner) == "pro")
        }
    }

    @Test("plan limits on the tutoring turn: free's turns a day run out with 429 quota_exceeded until midnight, a gated mode is 403 plan_required; an upgrade and a refund apply at once")
    func planLimits() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        let id = learner.id.uuidString.lowercased()
        let llm = LocalLLM { _, _ in .reply(["どうして？"]) }
        try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { llmBase in
            let environment = [
                "BFF_LLM_BASE_URL": "\(llmBase)/v1", "BFF_LLM_API_KEY": llm.apiKey, "BFF_LLM_MODEL": llm.model,
                "BFF_PLAN_LIMITS": #"{"free": {"turns_per_day": 2}, "basic": {"turns_per_day": 3}, "features": {"instant_question": "basic"}}"#,
            ]
            try await withRevenueCat(revenueCat, environment: environment) { client async throws in
                func turn(_ learner: Learner, _ body: String = #"{"message": "植物は光合成をします。"}"#) async throws -> TestResponse {
                    try await client.call(.post, "/api/v1/chat", as: learner, json: body)
                }
                let question = #"{"mode": "question", "subject_id": "biology"}"#
                let gated = try await turn(learner, question)
                #expect(gated.status == .forbidden && gated.errorCode == "plan_required" && gated.text.contains("basic"), "\(gated.text)")
                #expect(try await turn(learner).status == .ok)
                #expect(try await turn(learner).status == .ok)
                let spent = try await turn(learner)
                #expect(spent.status == .tooManyRequests && spent.errorCode == "quota_exceeded", "\(spent.text)")
                // Midnight in Asia/Tokyo, the default time zone.
                let untilMidnight = Int(spent.headers[.retryAfter] ?? "") ?? -1
                var tokyo = Calendar(identifier: .gregorian)
                tokyo.timeZone = TimeZone(identifier: "Asia/Tokyo")!
                let midnight = tokyo.nextDate(after: Date(), matching: DateComponents(hour: 0, minute: 0, second: 0), matchingPolicy: .nextTime)!
                #expect(abs(Double(untilMidnight) - midnight.timeIntervalSinceNow) < 5, "Retry-After \(untilMidnight)")
                // Refused turns asked the LLM nothing; another learner's quota is their own.
                #expect(llm.received.withLockedValue { $0.filter { $0.responseFormat == nil }.count } == 2)
                #expect(try await turn(other).status == .ok)

                // Basic unlocks the instant question and a third turn today, at once.
                revenueCat.set(id, [Self.basic: .init(expiresAt: Self.month())])
                #expect(try await webhook(client, Self.event("evt-basic", "INITIAL_PURCHASE", user: learner.id)).status == .ok)
                #expect(try await eventually { try await plan(client, learner) == "basic" })
                #expect(try await turn(learner, question).status == .ok)
                #expect(try await turn(learner).errorCode == "quota_exceeded")
                // A refund takes it back at once.
                revenueCat.update(id, product: Self.basic) { $0.refundedAt = Date() }
                #expect(try await webhook(client, Self.event("evt-refund", "CANCELLATION", user: learner.id)).status == .ok)
                #expect(try await eventually { try await plan(client, learner) == "free" })
                #expect(try await turn(learner, question).errorCode == "plan_required")
            }
        }
    }

    /// The web's products: Stripe's and RevenueCat Web Billing's ids, mapped beside the app stores'.
    static let webPro = "prod_LearnProMonthly"
    static let webBasic = "learn_basic_monthly_web"
    static let webProducts = ["BFF_IAP_PRODUCTS": "\(basic)=basic,\(pro)=pro,\(webPro)=pro,\(webBasic)=basic"]
    static let stripePortal = "https://billing.stripe.com/p/login/test_learnapp"

    @Test(
        "a plan bought on the web (Stripe, RevenueCat Web Billing) unlocks the app through the webhook's re-sync and through a restore; its row keeps the store, no platform, and the web's portal to manage it"
    )
    func webPurchases() async throws {
        let revenueCat = LocalRevenueCat(stripePortalURL: Self.stripePortal)
        let webBuyer = try await Learner.make(database: database)
        let stripeBuyer = try await Learner.make(database: database)
        revenueCat.set(webBuyer.id.uuidString.lowercased(), [Self.webBasic: .init(store: "rc_billing", expiresAt: Self.month())])
        revenueCat.set(stripeBuyer.id.uuidString.lowercased(), [Self.webPro: .init(store: "stripe", expiresAt: Self.month())])
        // The app's restore on a phone that bought nothing in its store.
        let restore = "restore-receipt-of-an-empty-phone-0001"
        revenueCat.register(emptyReceipt: restore, platform: "ios")
        try await withRevenueCat(revenueCat, environment: Self.webProducts) { client async throws in
            // Web Billing tells RevenueCat, RevenueCat the webhook: the re-sync brings the plan to the app.
            let event = Self.event("evt-web", "INITIAL_PURCHASE", user: webBuyer.id, extra: #""store": "RC_BILLING""#)
            #expect(try await webhook(client, event).status == .ok)
            #expect(try await inboxDone())
            let web = try await subscription(client, webBuyer)
            #expect(web["plan"] as? String == "basic" && web["status"] as? String == "active", "\(web)")
            let webRows = try #require(web["subscriptions"] as? [[String: Any]])
            #expect(webRows.count == 1 && webRows[0]["product_id"] as? String == Self.webBasic && webRows[0]["store"] as? String == "rc_billing")
            #expect(webRows[0]["platform"] == nil && webRows[0]["will_renew"] as? Bool == true)
            #expect(webRows[0]["management_url"] as? String == revenueCat.webBillingPortalURL)
            let me = try await client.call(.get, "/api/v1/me", as: webBuyer)
            #expect(me.json["plan"] as? String == "basic" && (me.json["subscription"] as? [String: Any])?["store"] as? String == "rc_billing")

            // A restore in the app: the receipt holds nothing, the Stripe purchase comes with the customer's state.
            let restored = try await verify(client, stripeBuyer, receipt: restore)
            #expect(restored.status == .ok && restored.json["plan"] as? String == "pro", "\(restored.text)")
            let rows = try #require(restored.json["subscriptions"] as? [[String: Any]])
            #expect(rows.count == 1 && rows[0]["store"] as? String == "stripe" && rows[0]["platform"] == nil)
            #expect(rows[0]["management_url"] as? String == Self.stripePortal)
            #expect(revenueCat.violations.withLockedValue { $0 }.isEmpty)

            for (learner, store) in [(webBuyer, "rc_billing"), (stripeBuyer, "stripe")] {
                #expect(try await scalar("SELECT store FROM iap_receipts WHERE user_id = \(learner.id)", as: String.self) == store)
                #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id) AND platform IS NULL") == 1)
            }
            // The entitlement every plan limit reads.
            #expect(try await scalar("SELECT plan FROM entitlements WHERE user_id = \(stripeBuyer.id)", as: String.self) == "pro")
        }
    }

    @Test("a promotional grant unlocks the plan its entitlement has in BFF_IAP_ENTITLEMENTS, never renews and has nothing to manage; an entitlement not listed unlocks nothing")
    func promotionalGrants() async throws {
        let revenueCat = LocalRevenueCat(entitlements: ["pro_access": [Self.pro]])
        let granted = try await Learner.make(database: database)
        let unlisted = try await Learner.make(database: database)
        let id = granted.id.uuidString.lowercased()
        // An earlier week's grant, over, and this month's: the entitlement names only the later one.
        let earlier = revenueCat.grant(id, entitlement: "pro_access", duration: "weekly", from: Date().addingTimeInterval(-30 * 86_400))
        let current = revenueCat.grant(id, entitlement: "pro_access", duration: "monthly")
        #expect(current == "rc_promo_pro_access_monthly" && earlier == "rc_promo_pro_access_weekly")
        revenueCat.grant(unlisted.id.uuidString.lowercased(), entitlement: "beta_tester", duration: "yearly")
        try await withRevenueCat(revenueCat, environment: ["BFF_IAP_ENTITLEMENTS": "pro_access=pro"]) { client async throws in
            for (index, learner) in [granted, unlisted].enumerated() {
                // RevenueCat tells of a grant as a non-renewing purchase of the promotional store.
                let event = Self.event("evt-grant-\(index)", "NON_RENEWING_PURCHASE", user: learner.id, extra: #""store": "PROMOTIONAL", "period_type": "PROMOTIONAL""#)
                #expect(try await webhook(client, event).status == .ok)
            }
            #expect(try await inboxDone())
            let state = try await subscription(client, granted)
            #expect(state["plan"] as? String == "pro" && state["status"] as? String == "active", "\(state)")
            let rows = try #require(state["subscriptions"] as? [[String: Any]])
            let live = try #require(rows.first { $0["product_id"] as? String == current })
            #expect(live["store"] as? String == "promotional" && live["platform"] == nil && live["management_url"] == nil)
            #expect(live["will_renew"] as? Bool == false && live["status"] as? String == "active")
            #expect(rows.first { $0["product_id"] as? String == earlier }?["status"] as? String == "expired")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(granted.id) AND entitlement_id = 'pro_access'") == 2)
            #expect(try await scalar("SELECT will_renew FROM entitlements WHERE user_id = \(granted.id)", as: Bool.self) == false)
            let me = try await client.call(.get, "/api/v1/me", as: granted)
            #expect((me.json["subscription"] as? [String: Any])?["product_id"] as? String == current)

            let other = try await subscription(client, unlisted)
            #expect(other["plan"] as? String == "free", "\(other)")
            #expect((other["subscriptions"] as? [[String: Any]])?.first?["store"] as? String == "promotional")
        }
    }

    @Test("a store left out of BFF_IAP_STORES, or one the server does not know, unlocks nothing; a row of it kept before goes at the next re-sync")
    func storesLeftOut() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let amazon = try await Learner.make(database: database)
        revenueCat.set(
            learner.id.uuidString.lowercased(),
            [Self.webPro: .init(store: "stripe", expiresAt: Self.month()), Self.basic: .init(store: "app_store", expiresAt: Self.month())])
        revenueCat.set(amazon.id.uuidString.lowercased(), [Self.pro: .init(store: "amazon", expiresAt: Self.month())])
        try await withRevenueCat(revenueCat, environment: Self.webProducts) { client async throws in
            #expect(try await webhook(client, Self.event("evt-stores-1", "INITIAL_PURCHASE", user: learner.id)).status == .ok)
            #expect(try await webhook(client, Self.event("evt-amazon", "INITIAL_PURCHASE", user: amazon.id)).status == .ok)
            #expect(try await inboxDone())
            #expect(try await plan(client, learner) == "pro")
            #expect(try await plan(client, amazon) == "free")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(amazon.id)") == 0)
        }
        // The web's stores taken out: the Stripe purchase no longer counts, the App Store's still does.
        let appStoresOnly = Self.webProducts.merging(["BFF_IAP_STORES": "app_store,play_store,promotional"]) { $1 }
        try await withRevenueCat(revenueCat, environment: appStoresOnly) { client async throws in
            #expect(try await webhook(client, Self.event("evt-stores-2", "RENEWAL", user: learner.id)).status == .ok)
            #expect(try await inboxDone())
            let state = try await subscription(client, learner)
            #expect(state["plan"] as? String == "basic", "\(state)")
            let rows = try #require(state["subscriptions"] as? [[String: Any]])
            #expect(rows.count == 1 && rows[0]["store"] as? String == "app_store" && rows[0]["platform"] as? String == "ios")
            #expect(try await scalar("SELECT count(*)::int FROM iap_receipts WHERE user_id = \(learner.id) AND store = 'stripe'") == 0)
        }
    }
}
