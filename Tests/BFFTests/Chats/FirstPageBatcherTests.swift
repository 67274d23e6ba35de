import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// First pages asked for at the same time share statements; each request still gets exactly its
/// own user's page, as a plain per-user query reads it.
@Suite("Chat list first pages, coalesced", .needsDatabase, .timeLimit(.minutes(3)))
struct FirstPageBatcherTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("64 concurrent first pages of 8 users (one without chats), limits 1-30: each its own, fewer statements than pages")
    func concurrentPagesAreTheirOwn() async throws {
        // Called off the event loops, so all in one queue: while one statement runs, the others coalesce.
        let client = PostgresClient(configuration: database.clientConfiguration(poolSize: 2))
        let repository = ChatStore.withOwnBatcher(Database(client: client, poolSize: 2))
        try await Commands.withDatabase(client) { client in
            var users: [UUID] = []
            for index in 0..<8 {
                let user = UUID()
                users.append(user)
                try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.test', \(user.uuidString))")
                // Every user's chats interleave in time with the others', so a mixed-up page shows.
                try await client.query(
                    """
                    INSERT INTO chats (user_id, title, created_at, updated_at, deleted_at)
                    SELECT \(user), 'chat ' || n || ' of user \(unescaped: String(index))', now(), now() - (n * 8 + \(index)) * interval '1 second',
                           CASE WHEN n % 7 = 0 THEN now() END
                    FROM generate_series(1, \(index * 5)) AS n
                    """)
            }
            var expected: [UUID: [ChatRecord]] = [:]
            for user in users {
                var records: [ChatRecord] = []
                for try await row in try await client.query(
                    """
                    SELECT \(unescaped: ChatStore.columns) FROM chats WHERE user_id = \(user) AND deleted_at IS NULL
                    ORDER BY updated_at DESC, id DESC
                    """)
                {
                    records.append(try ChatRecord(row: row))
                }
                expected[user] = records
            }
            let own = expected
            let requests = (0..<64).map { index in (user: users[index % users.count], limit: 1 + (index * 7) % 30) }
            let before = repository.firstPages.statements
            try await withThrowingTaskGroup(of: Void.self) { group in
                for request in requests {
                    group.addTask {
                        let page = try await repository.newest(userID: request.user, limit: request.limit, after: nil)
                        let chats = own[request.user] ?? []
                        #expect(page == Array(chats.prefix(request.limit + 1)), "user \(request.user) limit \(request.limit)")
                    }
                }
                try await group.waitForAll()
            }
            let statements = repository.firstPages.statements - before
            #expect(statements >= 1 && statements < requests.count, "\(statements) statements for \(requests.count) pages")
        }
    }

    @Test("behind a slow database (each batch waiting 1.5 s for a lock), a queued first page waits at most one deadline, then 503")
    func queuedPagesExpire() async throws {
        let client = PostgresClient(configuration: database.clientConfiguration(poolSize: 2))
        let repository = ChatStore.withOwnBatcher(Database(client: client, timeout: .seconds(4), poolSize: 2))
        let user = UUID()
        let outcome = try await Commands.withDatabase(client) { client in
            try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.test', \(user.uuidString))")
            let (locked, signal) = AsyncStream.makeStream(of: Void.self)
            let stop = NIOLockedValueBox(false)
            // Another session takes the table in turns, 1.5 s at a time: each batch waits for it,
            // then gets its answer, well within its 4 s deadline. The holder is told to stop, not
            // cancelled: cancelled inside its transaction, its rollback raced its own pool's
            // shutdown, and in about one run in four `holder.value` never returned, hanging the run.
            let holder = Task {
                defer { signal.finish() }
                try await database.withClient { other in
                    for _ in 0..<8 where !stop.withLockedValue({ $0 }) {
                        try await other.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                            _ = try await connection.query("LOCK TABLE chats IN ACCESS EXCLUSIVE MODE", logger: TestEnvironment.quietLogger)
                            signal.yield()
                            try await Task.sleep(for: .milliseconds(1500))
                        }
                    }
                }
            }
            for await _ in locked { break }
            let start = ContinuousClock.now
            let results = await withTaskGroup(of: (ok: Bool, seconds: Double).self) { group in
                for _ in 0..<320 {
                    group.addTask {
                        // Served, or refused as the database being unavailable (503): any other error
                        // is a failure of its own, not the refusal this test expects.
                        do {
                            _ = try await repository.newest(userID: user, limit: 20, after: nil)
                            return (true, (ContinuousClock.now - start).seconds)
                        } catch {
                            #expect(ErrorMapping.apiError(for: Database.classify(error))?.code == .databaseUnavailable, "\(error)")
                            return (false, (ContinuousClock.now - start).seconds)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            stop.withLockedValue { $0 = true }
            try await holder.value
            return results
        }
        let slowest = outcome.map(\.seconds).max() ?? 0
        // 320 pages are ten batches of 32, 1.5 s each: served in turn, the last waits about 15 s;
        // expired at the deadline, none waits much past the third batch (4.5 s).
        #expect(slowest < 8, "a first page waited \(slowest) s")
        #expect(outcome.contains { $0.ok } && outcome.contains { !$0.ok })
    }
}
