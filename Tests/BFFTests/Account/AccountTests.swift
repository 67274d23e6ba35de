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

/// Account deletion (5.1.1(v)) and the data export, through the configured app on a real database.
@Suite("Account deletion and export", .needsDatabase, .timeLimit(.minutes(3)))
struct AccountTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    func count(_ sql: PostgresQuery) async throws -> Int {
        try await database.withClient { client in
            for try await value in try await client.query(sql).decode(Int.self) { return value }
            return 0
        }
    }

    /// Rows naming `user` in every table that holds user data.
    func rowsOf(_ user: UUID) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in [
            "users WHERE id", "chats WHERE user_id", "messages WHERE user_id", "chat_tags WHERE user_id", "chat_evaluations WHERE user_id",
            "user_settings WHERE user_id", "user_subject_prefs WHERE user_id", "devices WHERE user_id", "push_tokens WHERE user_id",
            "recalls WHERE user_id", "jobs WHERE user_id", "refresh_families WHERE user_id", "idempotency_keys WHERE user_id",
            "iap_receipts WHERE user_id", "entitlements WHERE user_id", "plan_usage WHERE user_id",
        ] {
            counts[String(table.split(separator: " ")[0])] = try await count("SELECT count(*)::int FROM \(unescaped: table) = \(user)")
        }
        counts["rate_limits"] = try await count("SELECT count(*)::int FROM rate_limits WHERE key LIKE \("%" + user.uuidString.lowercased())")
        counts["revenuecat_events"] = try await count(
            "SELECT count(*)::int FROM revenuecat_events WHERE pending_users @> ARRAY[\(user)]::uuid[] OR app_user_ids @> ARRAY[\(user.uuidString.lowercased())]::text[]")
        return counts
    }

    /// A learner with something in every table: chats and messages, an evaluation with its recall
    /// and tags, settings, a device and push token, an idempotency key, a subscription, a webhook event.
    func populate(_ client: any TestClientProtocol, _ learner: Learner) async throws {
        let created = try await client.call(
            .post, "/api/v1/chats", as: learner, json: #"{"title": "光合成", "subject_id": "biology"}"#, headers: [HTTPField.Name("Idempotency-Key")!: "k-1"])
        #expect(created.status == .created, "\(created.text)")
        let chatID = try #require(created.json["id"] as? String)
        let evaluated = try await client.call(.post, "/api/v1/chats/\(chatID)/evaluation", as: learner, json: #"{"score": 4}"#)
        #expect(evaluated.status == .ok, "\(evaluated.text)")
        let settings = try await client.call(
            .put, "/api/v1/settings", as: learner,
            json:
                #"{"subjects": [{"subject_id": "biology", "topic_ids": [], "difficulty": 3}], "difficulty": 3, "notification_window": {"start": "08:00", "end": "20:00", "timezone": "Asia/Tokyo"}, "theme": "dark", "notifications_enabled": true}"#
        )
        #expect(settings.status == .ok, "\(settings.text)")
        let registered = try await client.call(
            .post, "/api/v1/push/register", as: learner,
            json: #"{"token": "\#(String(repeating: "a1", count: 28) + learner.id.uuidString.prefix(8).lowercased())", "platform": "ios", "provider": "apns", "device_id": "\#(learner.deviceID)"}"#)
        #expect(registered.status == .noContent, "\(registered.text)")
        try await database.withClient { client in
            _ = try await client.query(
                """
                INSERT INTO messages (chat_id, user_id, role, content) VALUES (\(UUID(uuidString: chatID)!), \(learner.id), 'user', '植物は光合成をします')
                """)
            _ = try await client.query(
                """
                INSERT INTO iap_receipts (receipt_id, user_id, store, platform, product_id, status, purchase_at, expires_at, raw_payload_hash, will_renew)
                VALUES (\("app_store:pro:" + learner.id.uuidString), \(learner.id), 'app_store', 'ios', 'pro', 'active', now(), now() + interval '20 days', \(Data(count: 32)), true)
                """)
            _ = try await client.query(
                """
                INSERT INTO revenuecat_events (event_id, type, app_user_ids, pending_users, body_hash)
                VALUES (\("evt-" + learner.id.uuidString), 'RENEWAL', ARRAY[\(learner.id.uuidString.lowercased())], ARRAY[\(learner.id)]::uuid[], \(Data(count: 32)))
                """)
            _ = try await client.query(
                """
                INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery)
                SELECT \(UUID(uuidString: chatID)!), id, \(learner.id), 0.5 FROM tags WHERE code = 'math.sign_error'
                """)
            _ = try await client.query(
                "INSERT INTO entitlements (user_id, plan, status, access_until, snapshot_at) VALUES (\(learner.id), 'pro', 'active', now() + interval '20 days', now())")
            _ = try await client.query("INSERT INTO plan_usage (user_id, day, turns, zone, ends_at) VALUES (\(learner.id), current_date, 3, 'UTC', now() + interval '1 hour')")
            _ = try await client.query("INSERT INTO rate_limits (key, tat) VALUES (\("chat:user:" + learner.id.uuidString.lowercased()), now() + interval '5 seconds')")
        }
    }

    @Test("delete: every row of the user goes in one transaction, sessions end, the RevenueCat customer is removed, an audit row without personal data stays; another user is untouched")
    func deleteAccount() async throws {
        let revenueCat = LocalRevenueCat()
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        revenueCat.set(learner.id.uuidString.lowercased(), ["pro": .init(expiresAt: Date().addingTimeInterval(86_400))])
        let logs = LogCapture()
        try await serveHTTP1(revenueCat.router, logger: TestEnvironment.quietLogger) { [database] base in
            let app = try await makeTestApp(
                database: database,
                environment: [
                    "BFF_REVENUECAT_BASE_URL": "\(base)/v1", "BFF_REVENUECAT_API_KEY": revenueCat.apiKey, "BFF_JOBS_POLL_INTERVAL_MS": "100",
                    "BFF_IAP_PRODUCTS": "pro=pro",
                ], logs: logs)
            try await app.live { client in
                try await populate(client, learner)
                try await populate(client, other)
                let before = try await rowsOf(learner.id)
                #expect(before.filter { $0.value == 0 }.isEmpty, "a table the test meant to fill is empty: \(before)")

                let deleted = try await client.call(.delete, "/api/v1/me", as: learner)
                #expect(deleted.status == .ok, "\(deleted.text)")
                #expect(deleted.json["store_subscription_active"] as? Bool == true && deleted.json["deleted_at"] is String)
                #expect(deleted.headers[.cacheControl] == "no-store")
                let after = try await rowsOf(learner.id)
                #expect(after.filter { $0.value != 0 }.isEmpty, "left behind: \(after.filter { $0.value != 0 })")
                let others = try await rowsOf(other.id)
                #expect(others.filter { $0.value == 0 }.isEmpty, "another user's rows went: \(others)")
                #expect(try await client.call(.get, "/api/v1/chats", as: other).json["items"].map { ($0 as? [Any])?.count } == 1)

                // The audit row: the id's salted hash and the time, nothing else.
                let audit = try await database.withClient { client in
                    var rows: [(Data, Data)] = []
                    for try await row in try await client.query("SELECT salt, user_hash FROM account_deletions").decode((Data, Data).self) {
                        rows.append(row)
                    }
                    return rows
                }
                #expect(audit.count == 1)
                #expect(audit.first.map { Data(SHA256.hash(data: $0.0 + Data(learner.id.uuidString.lowercased().utf8))) == $0.1 } == true)

                // The token is refused everywhere now; deleting again is 401, not a second deletion.
                #expect(try await client.call(.get, "/api/v1/me", as: learner).status == .unauthorized)
                #expect(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title": "x"}"#).status == .unauthorized)
                let again = try await client.call(.delete, "/api/v1/me", as: learner)
                #expect(again.status == .unauthorized && again.errorCode == "invalid_token", "\(again.text)")
                #expect(try await count("SELECT count(*)::int FROM account_deletions") == 1)
                #expect(try await count("SELECT count(*)::int FROM deleted_sessions") >= 1)

                // RevenueCat's customer goes by a job, which then forgets the id.
                #expect(try await eventually { revenueCat.deletedCustomers.withLockedValue { $0 } == [learner.id.uuidString.lowercased()] })
                #expect(
                    try await eventually {
                        try await count("SELECT count(*)::int FROM jobs WHERE kind = 'iap.delete_customer' AND state = 'completed' AND args = '{}'::jsonb") == 1
                    })
                #expect(try await count("SELECT count(*)::int FROM jobs WHERE args::text LIKE \("%" + learner.id.uuidString.lowercased() + "%")") == 0)
            }
        }
        #expect(!logs.all.contains { $0.contains("光合成") })
    }

    @Test("delete needs a login within 10 minutes (a refresh does not renew it): else 403 reauthentication_required and nothing is deleted")
    func reauthentication() async throws {
        let learner = try await Learner.make(database: database)
        try await database.withClient { client in
            _ = try await client.query("UPDATE refresh_families SET auth_time = now() - interval '11 minutes' WHERE user_id = \(learner.id)")
        }
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let refused = try await client.call(.delete, "/api/v1/me", as: learner)
            #expect(refused.status == .forbidden && refused.errorCode == "reauthentication_required", "\(refused.text)")
            #expect(try await count("SELECT count(*)::int FROM users WHERE id = \(learner.id)") == 1)
            #expect(try await client.call(.get, "/api/v1/me", as: learner).status == .ok)
        }
    }

    @Test("the login's time is the IdP's auth_time: a login the IdP completed from an hour-old session is refused; after reauthenticate=true it is accepted")
    func idpAuthenticationTime() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = .init(value: "student-with-idp-session")
                claims.authTime = Date().addingTimeInterval(-3_600).timeIntervalSince1970
                let silent = try await idp.signIn(AppLogin(deviceID: "phone-sso-1"), as: claims, with: client)
                let staleToken = try #require(silent.json["access_token"] as? String)
                let refused = try await client.execute(uri: "/api/v1/me", method: .delete, headers: [.authorization: "Bearer \(staleToken)"])
                #expect(refused.status == .forbidden && refused.errorCode == "reauthentication_required", "\(refused.text)")
                // A refresh of that session gains nothing.
                let refreshed = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(try #require(silent.json["refresh_token"] as? String))","device_id":"phone-sso-1"}"#))
                let refreshedToken = try #require(refreshed.json["access_token"] as? String)
                #expect(
                    try await client.execute(uri: "/api/v1/me", method: .delete, headers: [.authorization: "Bearer \(refreshedToken)"]).status == .forbidden)

                // The app asks for a new authentication; the IdP asks the learner and says so.
                let again = AppLogin(deviceID: "phone-sso-1", reauthenticate: true)
                let started = try await again.start(with: client)
                #expect(started.authorizationQuery["prompt"] == "login" && started.authorizationQuery["max_age"] == "0", "\(started.authorizationURL)")
                #expect(try await AppLogin(deviceID: "phone-sso-1").start(with: client).authorizationQuery["prompt"] == nil)
                claims.nonce = started.nonce
                claims.authTime = Date().timeIntervalSince1970
                let code = "code-" + SecureRandom.token()
                idp.grant(code: code, challenge: again.challenge, idToken: try await idp.sign(claims))
                let fresh = try await client.execute(uri: again.callbackURI(code: code, state: started.state), method: .get)
                let freshToken = try #require(fresh.json["access_token"] as? String)
                let deleted = try await client.execute(uri: "/api/v1/me", method: .delete, headers: [.authorization: "Bearer \(freshToken)"])
                #expect(deleted.status == .ok, "\(deleted.text)")
            }
        }
    }

    @Test("another server refuses a deleted account's token within its revocation poll, even for reads")
    func otherServerRefuses() async throws {
        let learner = try await Learner.make(database: database)
        let first = try await makeTestApp(database: database)
        let second = try await makeTestApp(database: database, environment: ["BFF_REVOCATION_POLL_INTERVAL": "1"])
        try await second.live { other in
            #expect(try await other.call(.get, "/api/v1/chats", as: learner).status == .ok)
            try await first.live { client async throws in
                #expect(try await client.call(.delete, "/api/v1/me", as: learner).status == .ok)
            }
            #expect(
                try await eventually(within: .seconds(5), every: .milliseconds(100)) {
                    try await other.call(.get, "/api/v1/chats", as: learner).status == .unauthorized
                })
        }
    }

    @Test("a later login with the same IdP account is a new, empty account")
    func newAccountAfterDeletion() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = .init(value: "student-to-delete")
                // An authentication made for this login: only such a login may delete the account.
                claims.authTime = Date().timeIntervalSince1970
                let first = try await idp.signIn(AppLogin(deviceID: "phone-delete-1"), as: claims, with: client)
                let token = try #require(first.json["access_token"] as? String)
                let firstID = try #require((first.json["user"] as? [String: Any])?["id"] as? String)
                let headers: HTTPFields = [.authorization: "Bearer \(token)", .contentType: "application/json"]
                let chat = try await client.execute(uri: "/api/v1/chats", method: .post, headers: headers, body: ByteBuffer(string: #"{"title": "old"}"#))
                #expect(chat.status == .created)
                #expect(try await client.execute(uri: "/api/v1/me", method: .delete, headers: headers).status == .ok)

                let second = try await idp.signIn(AppLogin(deviceID: "phone-delete-1"), as: claims, with: client)
                let secondID = try #require((second.json["user"] as? [String: Any])?["id"] as? String)
                #expect(secondID != firstID)
                let newToken = try #require(second.json["access_token"] as? String)
                let chats = try await client.execute(uri: "/api/v1/chats", method: .get, headers: [.authorization: "Bearer \(newToken)"])
                #expect((chats.json["items"] as? [Any])?.count == 0)
            }
        }
    }

    @Test("export: one JSON document with everything, streamed in pieces; 10,000 messages; nothing of another user")
    func export() async throws {
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            try await populate(client, learner)
            try await populate(client, other)
            try await database.withClient { client in
                // 10,000 messages over three chats.
                _ = try await client.query(
                    """
                    WITH c AS (
                        INSERT INTO chats (user_id, title) SELECT \(learner.id), 'bulk ' || n FROM generate_series(1, 3) n RETURNING id
                    ), numbered AS (SELECT id, row_number() OVER () AS k FROM c)
                    INSERT INTO messages (chat_id, user_id, role, content, created_at)
                    SELECT numbered.id, \(learner.id), CASE WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END,
                           repeat('説明', 40) || n, now() - make_interval(secs => 20000 - n)
                    FROM generate_series(1, 10000) n JOIN numbered ON numbered.k = 1 + n % 3
                    """)
            }
            let port = try #require(client.port)
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/v1/me/export")
            request.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            #expect(response.status == .ok)
            #expect(response.headers.first(name: "content-disposition")?.contains("attachment") == true)
            var body = ByteBuffer()
            var pieces = 0
            for try await var piece in response.body {
                pieces += 1
                body.writeBuffer(&piece)
            }
            #expect(pieces > 3, "the export came in \(pieces) pieces")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any])
            #expect(document["format"] as? String == "bff-export-1")
            #expect((document["user"] as? [String: Any])?["id"] as? String == learner.id.uuidString.lowercased())
            let chats = try #require(document["chats"] as? [[String: Any]])
            #expect(chats.count == 4)
            let messages = chats.flatMap { $0["messages"] as? [[String: Any]] ?? [] }
            #expect(messages.count == 10_001)
            #expect(Set(messages.compactMap { $0["user_id"] as? String }) == [learner.id.uuidString.lowercased()])
            #expect(chats.contains { $0["evaluation"] is [String: Any] })
            #expect((document["devices"] as? [Any])?.isEmpty == false && (document["push_registrations"] as? [[String: Any]])?.first?["token"] == nil)
            #expect((document["subscriptions"] as? [Any])?.count == 1 && (document["recalls"] as? [Any])?.count == 1)
            #expect((document["settings"] as? [String: Any])?["theme"] as? String == "dark")
            #expect(!String(buffer: body).contains(other.id.uuidString.lowercased()))
            // A token of no account is refused before anything is written.
            let stranger = try await Learner.make(database: database)
            try await database.withClient { client in _ = try await client.query("DELETE FROM users WHERE id = \(stranger.id)") }
            #expect(try await client.call(.get, "/api/v1/me/export", as: stranger).status == .unauthorized)
        }
    }
}
