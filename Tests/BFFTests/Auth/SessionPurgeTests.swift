import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing
@testable import BFF

@Suite("Purge of spent refresh tokens")
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
        _ = try await client.query("""
            INSERT INTO refresh_tokens (token_hash, family_id, device_id, issued_at, expires_at, used_at)
            SELECT sha256(convert_to(gen_random_uuid()::text, 'UTF8')), f.id, f.device_id,
                   now() - make_interval(days => \(daysAgo)::int + 30), now() - make_interval(days => \(daysAgo)::int),
                   now() - make_interval(days => \(daysAgo)::int + 29)
            FROM refresh_families f, generate_series(1, \(count)::int)
            WHERE f.user_id = \(user)
            """)
    }

    private static func tokens(of user: UUID, on client: PostgresClient) async throws -> (families: Int, tokens: Int) {
        let rows = try await client.query("""
            SELECT (SELECT count(*) FROM refresh_families WHERE user_id = \(user))::int,
                   (SELECT count(*) FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE f.user_id = \(user))::int
            """)
        for try await counts in rows.decode((Int, Int).self) { return counts }
        return (-1, -1)
    }

    @Test("tokens a week past expiry go, in batches; a family goes with its last token; live sessions still refresh")
    func purge() async throws {
        let live = try await signIn("purge-live-1"), dead = try await signIn("purge-dead-1"), recent = try await signIn("purge-recent")
        let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 1)))
        let counts = try await Commands.withDatabase(pool.client) { client in
            // The live family: 12,000 rotated tokens past the grace (three batches), 2 within it, its head.
            try await Self.addSpentTokens(12_000, expiredDaysAgo: 8, user: live.user, on: client)
            try await Self.addSpentTokens(2, expiredDaysAgo: 3, user: live.user, on: client)
            // The dead family: its head expired past the grace too.
            try await Self.addSpentTokens(3, expiredDaysAgo: 9, user: dead.user, on: client)
            _ = try await client.query("""
                UPDATE refresh_tokens t SET issued_at = now() - interval '40 days', expires_at = now() - interval '10 days'
                FROM refresh_families f WHERE f.id = t.family_id AND f.user_id = \(dead.user) AND t.used_at IS NULL
                """)
            _ = try await client.query(
                "UPDATE refresh_families SET created_at = now() - interval '40 days' WHERE user_id IN (\(live.user), \(dead.user))")
            try await Self.addSpentTokens(1, expiredDaysAgo: 6, user: recent.user, on: client)

            try await IdentityRepository(database: pool).purgeSpentSessions()
            return [try await Self.tokens(of: live.user, on: client), try await Self.tokens(of: dead.user, on: client),
                    try await Self.tokens(of: recent.user, on: client)]
        }
        #expect(counts.map(\.families) == [1, 0, 1])
        #expect(counts.map(\.tokens) == [3, 0, 2])

        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.test(.router) { client in
            let refreshed = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"refresh_token":"\#(live.pair.refreshToken)","device_id":"purge-live-1"}"#))
            #expect(refreshed.status == .ok, "\(refreshed.text)")
        }
    }
}
