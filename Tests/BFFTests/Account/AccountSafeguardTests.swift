import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// What keeps the account operations safe to expose: deletion only after an authentication made for
/// the session's login, and an export that one learner cannot run many times at once.
@Suite("Account safeguards", .needsDatabase, .timeLimit(.minutes(3)))
struct AccountSafeguardTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("a login whose ID token has no auth_time, or one older than the login's start, succeeds but never counts as fresh for deletion")
    func authTimeMustBeFresh() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                for (device, authTime) in [("phone-noauth-1", nil), ("phone-stale-1", Date().addingTimeInterval(-120).timeIntervalSince1970)] {
                    var claims = TestIDClaims(iss: .init(value: idp.issuer))
                    claims.sub = .init(value: "student-\(device)")
                    claims.authTime = authTime
                    let login = try await idp.signIn(AppLogin(deviceID: device, reauthenticate: true), as: claims, with: client)
                    #expect(login.status == .ok, "\(login.text)")
                    let token = try #require(login.json["access_token"] as? String)
                    #expect(try await client.me(token).status == .ok)
                    let refused = try await client.execute(uri: "/api/v1/me", method: .delete, headers: [.authorization: "Bearer \(token)"])
                    #expect(refused.status == .forbidden && refused.errorCode == "reauthentication_required", "\(device): \(refused.text)")
                }
            }
        }
    }

    @Test("freshAuthTime: the IdP's auth_time within a minute before the login's start or later, never later than now")
    func freshAuthTimeRule() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var login = PendingLogin(nonce: "n", codeChallenge: "c", deviceID: "d", redirectURI: "r")
        login.startedAt = start
        let now = start.addingTimeInterval(30)
        #expect(AuthService.freshAuthTime(nil, login: login, now: now) == nil)
        #expect(AuthService.freshAuthTime(start.addingTimeInterval(-61).timeIntervalSince1970, login: login, now: now) == nil)
        #expect(AuthService.freshAuthTime(start.addingTimeInterval(-59).timeIntervalSince1970, login: login, now: now) == start.addingTimeInterval(-59))
        #expect(AuthService.freshAuthTime(start.addingTimeInterval(3_600).timeIntervalSince1970, login: login, now: now) == now)
    }

    /// `count` chats for `learner`, chat n holding n % 4 messages (some none), created in order.
    private func populate(_ learner: Learner, chats count: Int, messageBytes: Int = 20) async throws {
        try await database.withClient { client in
            _ = try await client.query(
                """
                WITH c AS (
                    INSERT INTO chats (user_id, title, created_at)
                    SELECT \(learner.id), 'chat ' || n, now() - make_interval(secs => 100000 - n) FROM generate_series(1, \(count)) n
                    RETURNING id, title
                )
                INSERT INTO messages (chat_id, user_id, role, content, created_at)
                SELECT c.id, \(learner.id), 'user', c.title || ' message ' || k || ' ' || repeat('x', \(messageBytes)::int),
                       now() - make_interval(secs => 50000 - k)
                FROM c, generate_series(1, (split_part(c.title, ' ', 2)::int) % 4) k
                """)
        }
    }

    @Test("the export walks chats a page at a time with their messages read together: every chat in order, each with exactly its messages")
    func exportAcrossPages() async throws {
        let learner = try await Learner.make(database: database)
        try await populate(learner, chats: 2 * AccountExport.chatPageSize + 37)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let response = try await client.call(.get, "/api/v1/me/export", as: learner)
            #expect(response.status == .ok)
            let chats = try #require(response.json["chats"] as? [[String: Any]])
            #expect(chats.count == 2 * AccountExport.chatPageSize + 37)
            for (index, entry) in chats.enumerated() {
                let title = (entry["chat"] as? [String: Any])?["title"] as? String
                #expect(title == "chat \(index + 1)")
                let messages = (entry["messages"] as? [[String: Any]] ?? []).compactMap { $0["content"] as? String }
                #expect(messages.map { String($0.prefix(while: { $0 != "x" })) } == (0..<((index + 1) % 4)).map { "chat \(index + 1) message \($0 + 1) " })
            }
        }
    }

    @Test("one export at a time per learner (429 while one runs), 2 a minute, and it needs chat:rw besides profile:read")
    func exportLimits() async throws {
        let learner = try await Learner.make(database: database)
        let profileOnly = try await Learner.make(database: database, scopes: ["profile:read"])
        // About 40 MB: the first export fills the socket's buffers and waits for its reader.
        try await populate(learner, chats: 400, messageBytes: 60_000)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let port = try #require(client.port)
            var first = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/v1/me/export")
            first.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
            let running = try await HTTPClient.shared.execute(first, timeout: .seconds(60))
            #expect(running.status == .ok)
            // Its body is not read yet: the export is still running.
            let second = try await client.call(.get, "/api/v1/me/export", as: learner)
            #expect(second.status == .tooManyRequests && second.errorCode == "rate_limited", "\(second.text)")
            #expect(second.headers[.retryAfter] != nil)
            var bytes = 0
            for try await piece in running.body { bytes += piece.readableBytes }
            #expect(bytes > 10_000_000)
            // Two in this minute already: the third is refused by the rate, not the lease.
            let third = try await client.call(.get, "/api/v1/me/export", as: learner)
            #expect(third.status == .tooManyRequests && third.headers[.rateLimitLimit] == "2", "\(third.text)")
            let narrow = try await client.call(.get, "/api/v1/me/export", as: profileOnly)
            #expect(narrow.status == .forbidden && narrow.errorCode == "insufficient_scope")
        }
        let leases = try await database.withClient { client in
            for try await count in try await client.query("SELECT count(*)::int FROM account_export_leases").decode(Int.self) { return count }
            return -1
        }
        #expect(leases == 0, "a finished export gives its lease back")
    }
}
