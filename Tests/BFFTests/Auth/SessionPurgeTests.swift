import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Purge of spent refresh tokens", .needsDatabase, .timeLimit(.minutes(3)))
struct SessionPurgeTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private func signIn(_ device: String) async throws -> (user: UUID, pair: Commands.IssuedPair) {
        let user = UUID()
        let pair = try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: user, deviceID: device, scopes: AccessTokens.allScopes)
        return (user, pair)
    }

    /// Adds `count` rotated tokens to the user's family that expired `daysAgo` days ago.
    private static func addSpentTokens(_ count: Int, expiredDaysAgo daysAgo: Int, user: UUID, on client: PostgresClient) async throws {
        _ = try await client.query(
            """
            INSERT INTO refresh_tokens (token_hash, family_id, device_id, issued_at, expires_at, used_at)
            SELECT sha256(convert_to(gen_random_uuid()::text, 'UTF8')), f.id, f.device_id,
                   now() - make_interval(days => \(daysAgo)::int + 30), now() - make_interval(days => \(daysAgo)::int),
                   now() - make_interval(days => \(daysAgo)::int + 29)
            FROM refresh_families f, generate_series(1, \(count)::int)
            WHERE f.user_id = \(user)
            """)
    }

    private static func tokens(of user: UUID, on client: PostgresClient) async throws -> (families: Int, tokens: Int) {
        let rows = try await client.query(
            """
            SELECT (SELECT count(*) FROM refresh_families WHERE user_id = \(user))::int,
                   (SELECT count(*) FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE f.user_id = \(user))::int
            """)
        for try await counts in rows.decode((Int, Int).self) { return counts }
        return (-1, -1)
    }

    @Test("tokens a week past expiry go, oldest first in batches; a family goes once all its tokens are that old; live sessions still refresh")
    func purge() async throws {
        let live = try await signIn("purge-live-1"), dead = try await signIn("purge-dead-1")
        let expiring = try await signIn("purge-expiring"), recent = try await signIn("purge-recent")
        let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2)))
        let (held, counts) = try await Commands.withDatabase(pool.client) { client in
            // The live family: 12,000 rotated tokens past the grace, 2 within it, and its head.
            try await Self.addSpentTokens(12_000, expiredDaysAgo: 8, user: live.user, on: client)
            try await Self.addSpentTokens(2, expiredDaysAgo: 3, user: live.user, on: client)
            // The dead family: 6,000 tokens and its head past the grace, more than one batch holds,
            // so its last tokens and the family go in a later batch than its first ones.
            try await Self.addSpentTokens(6_000, expiredDaysAgo: 9, user: dead.user, on: client)
            try await Self.expireHead(of: dead.user, daysAgo: 10, on: client)
            // Its head expired within the grace: the family stays, only its old tokens go.
            try await Self.addSpentTokens(3, expiredDaysAgo: 8, user: expiring.user, on: client)
            try await Self.expireHead(of: expiring.user, daysAgo: 3, on: client)
            try await Self.addSpentTokens(1, expiredDaysAgo: 6, user: recent.user, on: client)
            let everyone = [live.user, dead.user, expiring.user, recent.user]

            // Another replica's turn: this one deletes nothing.
            let held = try await client.withTransaction(logger: Logger(label: "test")) { connection in
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(IdentityStore.purgeLockKey))", logger: Logger(label: "test"))
                try await IdentityStore(database: pool).purgeSpentSessions()
                var counts: [Int] = []
                for user in everyone { counts.append(try await Self.tokens(of: user, on: client).tokens) }
                return counts
            }
            try await IdentityStore(database: pool).purgeSpentSessions()
            var counts: [(families: Int, tokens: Int)] = []
            for user in everyone { counts.append(try await Self.tokens(of: user, on: client)) }
            return (held, counts)
        }
        #expect(held == [12_003, 6_001, 4, 2])
        #expect(counts.map(\.families) == [1, 0, 1, 1])
        #expect(counts.map(\.tokens) == [3, 0, 1, 2])

        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.test(.router) { client in
            for (session, device, expected) in [
                (live, "purge-live-1", nil), (expiring, "purge-expiring", "refresh_expired"), (dead, "purge-dead-1", "invalid_refresh_token"),
            ] {
                let refreshed = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(session.pair.refreshToken)","device_id":"\#(device)"}"#))
                #expect(refreshed.errorCode == expected, "\(device): \(refreshed.text)")
                #expect(refreshed.status == (expected == nil ? .ok : .unauthorized))
            }
        }
    }

    private static func expireHead(of user: UUID, daysAgo: Int, on client: PostgresClient) async throws {
        _ = try await client.query(
            """
            UPDATE refresh_tokens t SET issued_at = now() - make_interval(days => \(daysAgo)::int + 30),
                                        expires_at = now() - make_interval(days => \(daysAgo)::int)
            FROM refresh_families f WHERE f.id = t.family_id AND f.user_id = \(user) AND t.used_at IS NULL
            """)
    }
}
