import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

/// The writes an app repeats are limited per learner, as the operation table says: over the limit
/// each is 429 `rate_limited` with `Retry-After` and the limit's `RateLimit-*` headers.
@Suite("Per-user rate limits", .needsDatabase, .timeLimit(.minutes(3)))
struct UserRateLimitTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    static let limited: [(id: String, bucket: String, rate: Int)] = OperationTable.all.flatMap { operation in
        operation.policy.rateLimits.compactMap { limit in
            if case .perUser(let bucket, let rate, _) = limit { return (operation.id, bucket, rate) }
            return nil
        }
    }

    @Test("the limits the contract documents are the table's")
    func documented() {
        let byID = Dictionary(Self.limited.map { ($0.id, $0.rate) }, uniquingKeysWith: { first, _ in first })
        #expect(byID == ["exportMe": 2, "createChat": 60, "renameChat": 120, "deleteChat": 120, "replaceSettings": 30, "registerPushToken": 30])
        // Renames and deletions share one budget.
        #expect(Set(Self.limited.filter { ["renameChat", "deleteChat"].contains($0.id) }.map(\.bucket)).count == 1)
    }

    @Test("POST /chats: past 60 in a minute it is 429 rate_limited with Retry-After and creates nothing; another learner is not affected")
    func chatCreation() async throws {
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        let created = try await app.live { client in
            var created = 0
            // The limit refills one a second, so a few more than 60 may pass while these are sent.
            for number in 1...100 {
                let response = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title": "chat \#(number)"}"#)
                if response.status == .created {
                    created += 1
                    continue
                }
                #expect(response.status == .tooManyRequests && response.errorCode == "rate_limited", "\(response.text)")
                #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 >= 1)
                #expect(response.headers[.rateLimitLimit] == "60" && response.headers[.rateLimitRemaining] == "0")
                break
            }
            #expect((60..<100).contains(created), "\(created) created before the first refusal")
            #expect(try await client.call(.post, "/api/v1/chats", as: other, json: #"{"title": "mine"}"#).status == .created)
            return created
        }
        let count = try await database.withClient { client in
            for try await count in try await client.query("SELECT count(*)::int FROM chats WHERE user_id = \(learner.id)").decode(Int.self) {
                return count
            }
            return -1
        }
        #expect(count == created)
    }

    @Test("every per-user limited operation answers 429 once its learner's budget is spent", arguments: Self.limited.map(\.id))
    func spentBudget(_ id: String) async throws {
        let operation = try #require(OperationTable.operation(id: id))
        guard case .perUser(let bucket, let rate, let period) = try #require(operation.policy.rateLimits.first) else {
            Issue.record("\(id): not a per-user limit")
            return
        }
        let learner = try await Learner.make(database: database)
        // Spent for the next ten minutes: the limiter's theoretical arrival time far ahead.
        try await database.withClient { client in
            _ = try await client.query(
                """
                INSERT INTO rate_limits (key, tat, last_allowed)
                VALUES (\(RateLimitMiddleware.userKey(bucket: bucket, userID: learner.id)), now() + interval '10 minutes' + make_interval(secs => \(period.seconds)), true)
                ON CONFLICT (key) DO UPDATE SET tat = excluded.tat
                """)
        }
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let path = operation.path.replacing(/\{[a-z_]+\}/, with: UUID().uuidString.lowercased())
            let body: String? = operation.method == .get || operation.method == .delete ? nil : "{}"
            let refused = try await client.call(operation.method, path, as: learner, json: body)
            #expect(refused.status == .tooManyRequests && refused.errorCode == "rate_limited", "\(id): \(refused.text)")
            #expect(refused.headers[.retryAfter] != nil && refused.headers[.rateLimitLimit] == String(rate), "\(id)")
        }
    }
}

/// The contract's limits on a request body's fields fit under the body cap.
@Suite("Body cap and schema", .needsDatabase, .timeLimit(.minutes(2)))
struct BodyCapSchemaTests {
    @Test("a schema-valid purchase at the receipt's maximum length, slashes escaped as a client may, is not refused as too large")
    func largestReceiptFits() async throws {
        let contract = try String(contentsOf: TestEnvironment.repository.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let receiptSchema = try #require(contract.firstRange(of: "        receipt:\n").map { contract[$0.upperBound...].prefix(600) })
        let maxLength = try #require(receiptSchema.firstMatch(of: /maxLength: (\d+)/).flatMap { Int($0.output.1) })
        #expect(maxLength < 65_536 && maxLength == APIService.receiptMaxLength)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let receipt = String((0..<maxLength).map { _ in alphabet.randomElement()! })
        let product = String(repeating: "p", count: 200)
        let body = #"{"platform": "android", "product_id": "\#(product)", "receipt": "\#(receipt.replacing("/", with: "\\/"))"}"#
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let response = try await client.call(.post, "/api/v1/iap/verify", as: learner, json: body)
            // Without RevenueCat configured the body is read, validated and then refused as unavailable.
            #expect(response.status == .serviceUnavailable && response.errorCode == "store_unavailable", "\(response.status) \(response.text.prefix(200))")
            // One character more breaks the schema: 422, not accepted.
            let over = body.replacing("\"receipt\": \"", with: "\"receipt\": \"A")
            let refused = try await client.call(.post, "/api/v1/iap/verify", as: learner, json: over)
            #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(refused.text.prefix(200))")
        }
    }
}
