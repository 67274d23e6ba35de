import Foundation
import PostgresNIO
import Testing
@testable import BFF

/// First pages asked for at the same time share statements; each request still gets exactly its
/// own user's page, as a plain per-user query reads it.
@Suite("Chat list first pages, coalesced")
struct FirstPageBatcherTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("64 concurrent first pages of 8 users (one without chats), limits 1-30: each its own, fewer statements than pages")
    func concurrentPagesAreTheirOwn() async throws {
        // Called off the event loops, so all in one queue: while one statement runs, the others coalesce.
        let client = PostgresClient(configuration: database.clientConfiguration(poolSize: 2))
        let repository = ChatRepository(database: Database(client: client, poolSize: 2))
        try await Commands.withDatabase(client) { client in
            var users: [UUID] = []
            for index in 0..<8 {
                let user = UUID()
                users.append(user)
                try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.test', \(user.uuidString))")
                // Every user's chats interleave in time with the others', so a mixed-up page shows.
                try await client.query("""
                    INSERT INTO chats (user_id, title, created_at, updated_at, deleted_at)
                    SELECT \(user), 'chat ' || n || ' of user \(unescaped: String(index))', now(), now() - (n * 8 + \(index)) * interval '1 second',
                           CASE WHEN n % 7 = 0 THEN now() END
                    FROM generate_series(1, \(index * 5)) AS n
                    """)
            }
            var expected: [UUID: [ChatRecord]] = [:]
            for user in users {
                var records: [ChatRecord] = []
                for try await row in try await client.query("""
                    SELECT \(unescaped: ChatRepository.columns) FROM chats WHERE user_id = \(user) AND deleted_at IS NULL
                    ORDER BY updated_at DESC, id DESC
                    """) {
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
}
