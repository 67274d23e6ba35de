import Foundation
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// `recall_pushes`' writes: the deliveries running at once record in one statement
/// (`bff_record_deliveries`), and each row, token and recall stays its own learner's.
@Suite("Push outcomes", .needsDatabase, .timeLimit(.minutes(2)))
struct PushOutcomeStoreTests {
    let url: DatabaseURL

    init() async throws {
        url = try await TestDatabases.shared.makeMigrated()
    }

    struct Learner {
        let user = UUID()
        let recall = UUID()
        var apns: String { "a1" + user.uuidString.lowercased().replacingOccurrences(of: "-", with: "") + String(repeating: "0", count: 30) }
        var fcm: String { "fcm:" + user.uuidString }
    }

    /// A learner with an APNs and an FCM token and a scheduled recall.
    func seed(_ learner: Learner, _ client: PostgresClient) async throws {
        let chat = UUID()
        try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(learner.user), 'https://idp.test', \(learner.user.uuidString))")
        try await client.query("INSERT INTO chats (id, user_id, title, status) VALUES (\(chat), \(learner.user), 'Newton', 'ended')")
        try await client.query(
            """
            INSERT INTO recalls (id, user_id, chat_id, interval_seconds, target_at, due_at)
            VALUES (\(learner.recall), \(learner.user), \(chat), 86400, now(), now())
            """)
        try await client.query(
            """
            INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
            VALUES (\(learner.user), \(learner.apns), 'ios', 'apns', \("ios-" + learner.user.uuidString)),
                   (\(learner.user), \(learner.fcm), 'android', 'fcm', \("and-" + learner.user.uuidString))
            """)
    }

    /// Runs `body` with two seeded learners, Ann and Ben.
    func withTwoLearners(_ body: @escaping @Sendable (PostgresClient, Learner, Learner) async throws -> Void) async throws {
        let (ann, ben) = (Learner(), Learner())
        try await url.withClient { client in
            try await seed(ann, client)
            try await seed(ben, client)
            try await body(client, ann, ben)
        }
    }

    func status(_ recall: UUID, _ client: PostgresClient) async throws -> String? {
        for try await status in try await client.query("SELECT status FROM recalls WHERE id = \(recall)").decode(String.self) { return status }
        return nil
    }

    func tokens(_ user: UUID, _ client: PostgresClient) async throws -> [String] {
        var tokens: [String] = []
        for try await token in try await client.query("SELECT token FROM push_tokens WHERE user_id = \(user) ORDER BY token").decode(String.self) {
            tokens.append(token)
        }
        return tokens
    }

    @Test("two learners' answers in one statement: each recall goes to sent only on its own acceptance, a dead token goes only from its owner")
    func twoLearnersInOneStatement() async throws {
        try await withTwoLearners { client, ann, ben in
            let key = PushOutcomeStore.tokenKey
            // Ann: APNs accepted, FCM dead. Ben: both to be retried; and a dead entry that names Ben
            // with Ann's APNs token, which is not his.
            let rows = try await client.query(
                """
                SELECT bff_record_deliveries(
                    \([ann.recall, ann.recall, ben.recall, ben.recall])::uuid[], \([ann.user, ann.user, ben.user, ben.user])::uuid[],
                    \([key(ann.apns), key(ann.fcm), key(ben.apns), key(ben.fcm)])::text[], \(["apns", "fcm", "apns", "fcm"])::text[],
                    \(["accepted", "dead", "retry", "retry"])::text[], \([-1.0, -1.0, 30.0, -1.0])::float8[],
                    \(["", "Unregistered", "TooManyRequests", "UNAVAILABLE"])::text[],
                    \([ann.user, ben.user])::uuid[], \([ann.fcm, ann.apns])::text[])
                """)
            var sent: [UUID] = []
            for try await ids in rows.decode([UUID].self) { sent = ids }
            #expect(sent == [ann.recall])
            #expect(try await status(ann.recall, client) == "sent")
            #expect(try await status(ben.recall, client) == "scheduled")
            #expect(try await tokens(ann.user, client) == [ann.apns])
            #expect(try await tokens(ben.user, client) == [ben.apns, ben.fcm].sorted())
            var outcomes: [String: (String, Bool)] = [:]
            for try await (recall, tokenKey, outcome, hasRetry) in try await client.query(
                "SELECT recall_id, token_key, outcome, retry_at IS NOT NULL FROM recall_pushes WHERE user_id IN (\(ann.user), \(ben.user))"
            ).decode((UUID, String, String, Bool).self) {
                outcomes["\(recall == ann.recall ? "ann" : "ben") \(tokenKey)"] = (outcome, hasRetry)
            }
            #expect(outcomes.count == 4)
            #expect(outcomes["ann \(key(ann.apns))"]?.0 == "accepted")
            #expect(outcomes["ann \(key(ann.fcm))"]?.0 == "dead")
            #expect(outcomes["ben \(key(ben.apns))"].map { $0.0 == "retry" && $0.1 } == true)
            #expect(outcomes["ben \(key(ben.fcm))"].map { $0.0 == "retry" && !$0.1 } == true)

            // Ben's retry accepted later: one more attempt on the same rows, and his recall is sent.
            let again = try await client.query(
                """
                SELECT bff_record_deliveries(\([ben.recall])::uuid[], \([ben.user])::uuid[], \([key(ben.apns)])::text[], \(["apns"])::text[],
                    \(["accepted"])::text[], \([-1.0])::float8[], \([""])::text[], \([UUID]())::uuid[], \([String]())::text[])
                """)
            for try await ids in again.decode([UUID].self) { #expect(ids == [ben.recall]) }
            for try await attempts in try await client.query(
                "SELECT attempts FROM recall_pushes WHERE recall_id = \(ben.recall) AND token_key = \(key(ben.apns))"
            ).decode(Int32.self) { #expect(attempts == 2) }
        }
    }

    @Test("a row that names another learner's recall writes nothing to it")
    func anotherLearnersRecallIsUntouched() async throws {
        try await withTwoLearners { client, ann, ben in
            let key = PushOutcomeStore.tokenKey
            let rows = try await client.query(
                """
                SELECT bff_record_deliveries(\([ann.recall])::uuid[], \([ben.user])::uuid[], \([key(ben.apns)])::text[], \(["apns"])::text[],
                    \(["accepted"])::text[], \([-1.0])::float8[], \([""])::text[], \([UUID]())::uuid[], \([String]())::text[])
                """)
            for try await ids in rows.decode([UUID].self) { #expect(ids.isEmpty) }
            #expect(try await status(ann.recall, client) == "scheduled")
        }
    }

    @Test("deliveries recording at once (gathered into shared statements) each learn whether they took their own recall to sent")
    func concurrentRecordsShareAStatement() async throws {
        let learners = (0..<6).map { _ in Learner() }
        let client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2))
        let store = PushOutcomeStore(database: Database(client: client, poolSize: 2), logger: TestEnvironment.quietLogger)
        try await Commands.withDatabase(client) { client in
            for learner in learners { try await seed(learner, client) }
            let results = try await withThrowingTaskGroup(of: (UUID, Bool).self) { group in
                for (index, learner) in learners.enumerated() {
                    // Every other learner's push was accepted.
                    let outcome: PushOutcomeRecord.Outcome = index.isMultiple(of: 2) ? .accepted : .retry
                    group.addTask {
                        let record = PushOutcomeRecord(target: PushTarget(token: learner.apns, provider: .apns), outcome: outcome)
                        return (learner.recall, try await store.record([record], recallID: learner.recall, userID: learner.user))
                    }
                }
                var results: [UUID: Bool] = [:]
                for try await (recall, tookToSent) in group { results[recall] = tookToSent }
                return results
            }
            for (index, learner) in learners.enumerated() {
                #expect(results[learner.recall] == index.isMultiple(of: 2))
                #expect(try await status(learner.recall, client) == (index.isMultiple(of: 2) ? "sent" : "scheduled"))
            }
        }
    }

    @Test("the previous release's bff_record_pushes still records one recall's answers, through the same rules")
    func previousReleasesCallStillRecords() async throws {
        let ann = Learner()
        try await url.withClient { client in
            try await seed(ann, client)
            let key = PushOutcomeStore.tokenKey
            let rows = try await client.query(
                """
                SELECT bff_record_pushes(\(ann.recall), \(ann.user), \([key(ann.apns), key(ann.fcm)])::text[], \(["apns", "fcm"])::text[],
                    \(["accepted", "dead"])::text[], \([-1.0, -1.0])::float8[], \(["", "Unregistered"])::text[], \([ann.fcm])::text[])
                """)
            for try await tookToSent in rows.decode(Bool.self) { #expect(tookToSent) }
            #expect(try await status(ann.recall, client) == "sent")
            #expect(try await tokens(ann.user, client) == [ann.apns])
        }
    }
}
