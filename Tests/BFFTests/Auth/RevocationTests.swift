import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Revoked sessions' access tokens", .needsDatabase, .timeLimit(.minutes(3)))
struct RevocationTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// What an operator command or another replica does: the database only, nothing in this process.
    private static func revoke(_ user: UUID, on connection: PostgresConnection) async throws {
        _ = try await connection.query(
            "UPDATE refresh_families SET revoked_at = now(), revoked_reason = 'operator' WHERE user_id = \(user)",
            logger: Logger(label: "test"))
    }

    @Test("a session revoked before start-up is refused from the first request; one revoked elsewhere while running, within a poll")
    func revokedElsewhere() async throws {
        let early = try await Learner.make(database: database), later = try await Learner.make(database: database), untouched = try await Learner.make(database: database)
        try await database.withClient { client in
            try await client.withConnection { try await Self.revoke(early.id, on: $0) }
        }
        let app = try await makeTestApp(database: database, environment: ["BFF_REVOCATION_POLL_INTERVAL": "1"])
        try await app.test(.router) { client in
            let first = try await client.me(early.accessToken)
            #expect(first.status == .unauthorized && first.errorCode == "invalid_token")
            try await database.withClient { client in
                try await client.withConnection { try await Self.revoke(later.id, on: $0) }
            }
            let seconds = try await client.secondsUntilRefused(later.accessToken)
            #expect(seconds.map { $0 < 4 } == true, "refused after \(seconds.map { "\($0) s" } ?? "never")")
            let me = try await client.me(untouched.accessToken)
            #expect(me.status == .ok)
        }
    }

    @Test("a revocation committed after several polls have passed its stamp is still found")
    func lateCommit() async throws {
        let slow = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_REVOCATION_POLL_INTERVAL": "1"])
        try await app.test(.router) { client in
            try await database.withClient { client in
                try await client.withTransaction(logger: Logger(label: "test")) { connection in
                    try await Self.revoke(slow.id, on: connection)
                    // Two polls run while the revocation, stamped with the transaction's start, is not
                    // yet visible: a poll reading only what is newer than the last one would miss it.
                    try await Task.sleep(for: .milliseconds(2500))
                }
            }
            let seconds = try await client.secondsUntilRefused(slow.accessToken)
            #expect(seconds.map { $0 < 4 } == true, "refused after \(seconds.map { "\($0) s" } ?? "never")")
        }
    }

    @Test("a poll reads the revocations of the last access-token lifetime (plus margin), and no older ones")
    func window() async throws {
        let inside = try await Learner.make(database: database), outside = try await Learner.make(database: database)
        let retention = RevokedSessions(accessTokenLifetime: .seconds(900)).retention
        try await database.withClient { client in
            for (session, age) in [(inside, retention - 30), (outside, retention + 30)] {
                _ = try await client.query(
                    """
                    UPDATE refresh_families SET revoked_at = now() - make_interval(secs => \(age)), revoked_reason = 'operator'
                    WHERE user_id = \(session.id)
                    """)
            }
        }
        let app = try await makeTestApp(database: database)
        try await app.test(.router) { client in
            for (session, expected) in [(inside, HTTPResponse.Status.unauthorized), (outside, .ok)] {
                let me = try await client.me(session.accessToken)
                #expect(me.status == expected)
            }
        }
    }

    @Test("a poll replaces what the last one read; this process's own revocations stay for the retention")
    func retention() {
        let sessions = RevokedSessions(accessTokenLifetime: .seconds(900))
        #expect(sessions.retention == 1020)
        let now = Date()
        let (polled, local, later) = (UUID(), UUID(), UUID())
        sessions.replacePolled(with: [polled], now: now)
        sessions.record([local], at: now)
        #expect(sessions.contains(polled) && sessions.contains(local) && !sessions.contains(later))
        sessions.replacePolled(with: [later], now: now.addingTimeInterval(1000))
        #expect(!sessions.contains(polled) && sessions.contains(local) && sessions.contains(later))
        sessions.replacePolled(with: [], now: now.addingTimeInterval(1021))
        #expect(!sessions.contains(local) && !sessions.contains(later))
    }
}
