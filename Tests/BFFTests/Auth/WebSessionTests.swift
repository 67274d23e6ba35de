import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// The web's Auth.js session cookie through the running server (docs/web-session.md): who it signs
/// in, what it may do without a device, and when it is refused.
@Suite("The web's session cookie", .needsDatabase, .timeLimit(.minutes(3)))
struct WebSessionTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// The IdP the test server trusts (`BFF_OIDC_ISSUER`).
    var issuer: String { TestEnvironment.serverEnvironment(database: database)["BFF_OIDC_ISSUER"] ?? "" }

    /// A session of the web's sign-in at that IdP as `subject`.
    func web(_ subject: String) -> WebLogin.Claims {
        WebLogin.Claims(issuer: issuer, subject: subject)
    }

    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        WebLogin.environment.merging(extra) { $1 }
    }

    /// `GET /api/v1/me` with the cookie alone.
    func me(_ client: some TestClientProtocol, _ token: String, name: String = WebLogin.secureCookie) async throws -> TestResponse {
        try await client.execute(uri: "/api/v1/me", method: .get, headers: WebLogin.headers(token, name: name, origin: nil))
    }

    func users(subject: String) async throws -> Int {
        try await database.withClient { client in
            for try await count in try await client.query("SELECT count(*)::int FROM users WHERE subject = \(subject)").decode(Int.self) {
                return count
            }
            return -1
        }
    }

    @Test("a cookie signs the web's learner in, made on first sight from email and name, the same account after; nothing secret is logged")
    func firstSight() async throws {
        let logs = LogCapture()
        var claims = web("web-first-sight")
        claims.email = "first-sight@example.com"
        claims.name = "First Sight"
        let token = try WebLogin.token(claims)
        let reissued = try WebLogin.token(claims)
        let app = try await makeTestApp(database: database, environment: environment(), logs: logs)
        try await app.live { client in
            let first = try await me(client, token)
            #expect(first.status == .ok, "\(first.text)")
            #expect(first.json["email"] as? String == "first-sight@example.com" && first.json["display_name"] as? String == "First Sight")
            let id = try #require(first.json["id"] as? String)
            // Auth.js issues the session again as the learner goes on: the same account.
            #expect(try await me(client, reissued).json["id"] as? String == id)
            #expect(try await me(client, token).json["id"] as? String == id)
        }
        #expect(try await users(subject: "web-first-sight") == 1)
        let everything = logs.all.joined()
        #expect(!logs.all.isEmpty)
        for secret in [token, reissued, WebLogin.secret, "first-sight@example.com"] {
            #expect(!everything.contains(secret), "a secret or the email appeared in the logs")
        }
    }

    @Test("the web's cookie names the same account as the app's login with the same IdP subject")
    func sameAccountAsTheApp() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(
                database: database, environment: WebLogin.environment.merging(["BFF_OIDC_ISSUER": idp.issuer]) { $1 })
            try await app.live { client in
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = .init(value: "student-web-and-app")
                let login = try await idp.signIn(AppLogin(deviceID: "phone-web-app-1"), as: claims, with: client)
                let appUser = try #require((login.json["user"] as? [String: Any])?["id"] as? String)
                let cookie = try WebLogin.token(WebLogin.Claims(issuer: idp.issuer, subject: "student-web-and-app"))
                let web = try await client.execute(uri: "/api/v1/me", method: .get, headers: WebLogin.headers(cookie, origin: nil))
                #expect(web.status == .ok && web.json["id"] as? String == appUser, "\(web.text)")
                // The issuer as a provider may write it, with a final slash, is the same issuer.
                let slashed = try WebLogin.token(WebLogin.Claims(issuer: idp.issuer + "/", subject: "student-web-and-app"))
                let again = try await client.execute(uri: "/api/v1/me", method: .get, headers: WebLogin.headers(slashed, origin: nil))
                #expect(again.json["id"] as? String == appUser)
            }
        }
    }

    @Test("a token too large for one cookie comes in Auth.js's chunks and is read whole; without a chunk it is nobody")
    func chunked() async throws {
        var claims = web("web-chunked")
        claims.picture = "https://img.example.com/" + String(repeating: "p", count: 6_000)
        let token = try WebLogin.token(claims)
        let cookie = WebLogin.cookie(token)
        #expect(cookie.contains("__Secure-authjs.session-token.1=") && !cookie.contains("__Secure-authjs.session-token="))
        let app = try await makeTestApp(database: database, environment: environment())
        try await app.live { client in
            let whole = try await me(client, token)
            #expect(whole.status == .ok, "\(whole.text)")
            let firstChunk = String(cookie.split(separator: ";")[0])
            let cut = try await client.execute(uri: "/api/v1/me", method: .get, headers: [.cookie: firstChunk])
            #expect(cut.status == .unauthorized && cut.errorCode == "invalid_token")
        }
    }

    @Test("authjs.session-token is read only with BFF_WEB_AUTH_INSECURE_COOKIE=true, and then the __Secure- cookie is not")
    func insecureCookie() async throws {
        let insecure = try WebLogin.token(web("web-insecure"), salt: WebLogin.insecureCookie)
        let secure = try WebLogin.token(web("web-insecure"))
        let strict = try await makeTestApp(database: database, environment: environment())
        try await strict.live { client in
            let answer1 = try await me(client, insecure, name: WebLogin.insecureCookie)
            #expect(answer1.status == .unauthorized)
            let answer2 = try await me(client, secure)
            #expect(answer2.status == .ok)
        }
        let development = try await makeTestApp(database: database, environment: environment(["BFF_WEB_AUTH_INSECURE_COOKIE": "true"]))
        try await development.live { client in
            let answer3 = try await me(client, insecure, name: WebLogin.insecureCookie)
            #expect(answer3.status == .ok)
            let answer4 = try await me(client, secure)
            #expect(answer4.status == .unauthorized)
            // The __Secure- cookie's token under the plain name: derived with the other salt, it opens with nothing here.
            let answer5 = try await me(client, secure, name: WebLogin.insecureCookie)
            #expect(answer5.status == .unauthorized)
        }
    }

    @Test("401 invalid_token, no account made: another IdP's, no idp_sub or idp_iss, expired, another secret's, over 30 days old; without a secret, not read")
    func refused() async throws {
        var foreign = web("web-refused")
        foreign.idpIssuer = "https://other-idp.example.com"
        var noSubject = web("web-refused")
        noSubject.idpSubject = nil
        var noIssuer = web("web-refused")
        noIssuer.idpIssuer = nil
        var expired = web("web-refused")
        expired.issuedAt = Date().addingTimeInterval(-120)
        expired.lifetime = 60
        var old = web("web-refused")
        old.issuedAt = Date().addingTimeInterval(-31 * 86_400)
        old.lifetime = 60 * 86_400
        let tokens = [
            try WebLogin.token(foreign), try WebLogin.token(noSubject), try WebLogin.token(noIssuer), try WebLogin.token(expired),
            try WebLogin.token(old), try WebLogin.token(web("web-refused"), secret: "not-the-web-secret"), "not.a.web.session.token",
        ]
        let app = try await makeTestApp(database: database, environment: environment())
        try await app.live { client in
            for (index, token) in tokens.enumerated() {
                let response = try await me(client, token)
                #expect(response.status == .unauthorized && response.errorCode == "invalid_token", "token \(index): \(response.text)")
                #expect(response.headers[.wwwAuthenticate] == "Bearer error=\"invalid_token\"")
            }
            // An operation that needs no token does not read the cookie: a stale one does not stand in its way.
            let open = try await client.execute(
                uri: "/api/v1/app-config?platform=ios&app_version=1.0.0", method: .get, headers: [.cookie: WebLogin.cookie(tokens[0])])
            #expect(open.status != .unauthorized, "\(open.text)")
        }
        let unconfigured = try await makeTestApp(database: database)
        try await unconfigured.live { client in
            let ignored = try await me(client, try WebLogin.token(web("web-refused")))
            #expect(ignored.status == .unauthorized && ignored.errorCode == "invalid_token")
        }
        #expect(try await users(subject: "web-refused") == 0)
    }

    @Test("the web's session has no device: push registration 403 insufficient_scope, devices listed with none current, logout 204 ending nothing")
    func noDevice() async throws {
        let token = try WebLogin.token(web("web-devices"))
        let operatorEnvironment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let app = try await makeTestApp(database: database, environment: environment())
        try await app.live { client in
            let signedIn = try await me(client, token)
            let idText = try #require(signedIn.json["id"] as? String)
            let userID = try #require(UUID(uuidString: idText))
            // The same learner on a phone, signed in as the app is.
            let phone = try await Commands.issueToken(
                environment: operatorEnvironment, userID: userID, deviceID: "web-devices-phone", scopes: AccessTokens.allScopes)

            let register = try await client.execute(
                uri: "/api/v1/push/register", method: .post, headers: WebLogin.headers(token),
                body: ByteBuffer(string: PushRegistrationTests.body(PushRegistrationTests.fcmToken("web"), device: "web-devices-phone")))
            #expect(register.status == .forbidden && register.errorCode == "insufficient_scope", "\(register.text)")
            let unregister = try await client.execute(
                uri: "/api/v1/push/unregister", method: .post, headers: WebLogin.headers(token),
                body: ByteBuffer(string: #"{"token":"\#(PushRegistrationTests.fcmToken("web"))"}"#))
            #expect(unregister.status == .forbidden && unregister.errorCode == "insufficient_scope", "\(unregister.text)")

            let devices = try await client.execute(uri: "/api/v1/devices", method: .get, headers: WebLogin.headers(token, origin: nil))
            let items = devices.json["items"] as? [[String: Any]] ?? []
            #expect(items.map { $0["device_id"] as? String } == ["web-devices-phone"], "\(devices.text)")
            #expect(items.allSatisfy { $0["current"] as? Bool == false })
            let fromPhone = try await client.execute(uri: "/api/v1/devices", method: .get, headers: [.authorization: "Bearer \(phone.accessToken)"])
            #expect((fromPhone.json["items"] as? [[String: Any]])?.first?["current"] as? Bool == true)

            let logout = try await client.execute(uri: "/api/v1/auth/logout", method: .post, headers: WebLogin.headers(token))
            #expect(logout.status == .noContent, "\(logout.text)")
            #expect(try await me(client, token).status == .ok, "the web's session goes on: the web ends it")
            #expect(try await client.me(phone.accessToken).status == .ok, "and so does the app's")
        }
    }

    @Test("DELETE /me by cookie: 403 reauthentication_required without a recent auth_time; with one the account goes, its cookies too; a later sign-in is a new account")
    func deletion() async throws {
        let subject = "web-delete"
        // Without auth_time, with one 11 minutes old, with one 30 seconds old.
        let unknown = try WebLogin.token(web(subject))
        var claims = web(subject)
        claims.authTime = Date().addingTimeInterval(-11 * 60)
        let stale = try WebLogin.token(claims)
        claims.authTime = Date().addingTimeInterval(-30)
        let fresh = try WebLogin.token(claims)
        let app = try await makeTestApp(database: database, environment: environment())
        try await app.live { client in
            let first = try await me(client, unknown)
            let firstID = try #require(first.json["id"] as? String)
            for token in [unknown, stale] {
                let refused = try await client.execute(uri: "/api/v1/me", method: .delete, headers: WebLogin.headers(token))
                #expect(refused.status == .forbidden && refused.errorCode == "reauthentication_required", "\(refused.text)")
            }
            #expect(try await users(subject: subject) == 1)

            let deleted = try await client.execute(uri: "/api/v1/me", method: .delete, headers: WebLogin.headers(fresh))
            #expect(deleted.status == .ok, "\(deleted.text)")
            #expect(try await users(subject: subject) == 0)
            // Every cookie issued before the deletion is refused, and makes no account again.
            for token in [fresh, unknown] {
                let refused = try await me(client, token)
                #expect(refused.status == .unauthorized && refused.errorCode == "invalid_token", "\(refused.text)")
            }
            #expect(try await users(subject: subject) == 0)

            // A sign-in after it (a second later, past the deletion's time) starts a new, empty account.
            var later = web(subject)
            later.issuedAt = Date().addingTimeInterval(1)
            let again = try await me(client, try WebLogin.token(later))
            #expect(again.status == .ok, "\(again.text)")
            #expect(again.json["id"] as? String != firstID)
        }
    }

    @Test("a present Authorization header alone decides: a valid Bearer wins over the cookie, an invalid one is 401 whatever the cookie")
    func bearerWins() async throws {
        let learner = try await Learner.make(database: database)
        let token = try WebLogin.token(web("web-bearer"))
        let app = try await makeTestApp(database: database, environment: environment())
        try await app.live { client in
            let byCookie = try await me(client, token)
            #expect(byCookie.status == .ok)
            var both = WebLogin.headers(token, origin: nil)
            both[.authorization] = "Bearer \(learner.accessToken)"
            let bearer = try await client.execute(uri: "/api/v1/me", method: .get, headers: both)
            #expect(bearer.json["id"] as? String == learner.id.uuidString.lowercased())
            #expect(byCookie.json["id"] as? String != learner.id.uuidString.lowercased())
            for invalid in ["Bearer not.a.token", "Basic abc"] {
                both[.authorization] = invalid
                let refused = try await client.execute(uri: "/api/v1/me", method: .get, headers: both)
                #expect(refused.status == .unauthorized && refused.errorCode == "invalid_token", "\(invalid)")
            }
        }
    }

    @Test("a cookie-authenticated unsafe request needs an allow-listed Origin: 403 origin_not_allowed, nothing done and no account made; GET and Bearer need none")
    func origin() async throws {
        let token = try WebLogin.token(web("web-origin"))
        let app = try await makeTestApp(database: database, environment: environment(["BFF_CORS_ORIGINS": "https://app.example.com"]))
        try await app.live { client in
            for origin in [nil, "null", "https://evil.example", "https://app.example.com.evil.example", "http://app.example.com"] {
                let refused = try await client.execute(
                    uri: "/api/v1/chats", method: .post, headers: WebLogin.headers(token, origin: origin), body: ByteBuffer(string: "{}"))
                #expect(refused.status == .forbidden && refused.errorCode == "origin_not_allowed", "\(origin ?? "no Origin"): \(refused.text)")
            }
            #expect(try await users(subject: "web-origin") == 0, "a forged request makes no account")
            let listed = try await client.execute(uri: "/api/v1/chats", method: .get, headers: WebLogin.headers(token, origin: nil))
            #expect(listed.status == .ok && (listed.json["items"] as? [Any])?.isEmpty == true, "a refused request created nothing")
            let created = try await client.execute(uri: "/api/v1/chats", method: .post, headers: WebLogin.headers(token), body: ByteBuffer(string: "{}"))
            #expect(created.status == .created, "\(created.text)")
            // An invalid cookie acts as nobody: 401, as without one.
            let invalid = try await client.execute(
                uri: "/api/v1/chats", method: .post, headers: WebLogin.headers("not.a.token", origin: nil), body: ByteBuffer(string: "{}"))
            #expect(invalid.status == .unauthorized && invalid.errorCode == "invalid_token")
        }
    }

    @Test("bff auth revoke --user refuses the web's cookies issued before it, on a server that polled it and on one that has not yet; one issued after works")
    func operatorRevocation() async throws {
        let operatorEnvironment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let before = try WebLogin.token(web("web-revoked"))
        let polling = try await makeTestApp(database: database, environment: environment(["BFF_REVOCATION_POLL_INTERVAL": "1"]))
        // Started before the revocation and polling again only in a minute: only the database knows.
        let unpolled = try await makeTestApp(database: database, environment: environment(["BFF_REVOCATION_POLL_INTERVAL": "60"]))
        try await unpolled.live { other in
            let userID = try await polling.live { client -> String in
                let signedIn = try await me(client, before)
                let id = try #require(signedIn.json["id"] as? String)
                let user = try #require(UUID(uuidString: id))
                let revoked = try await Commands.revoke(environment: operatorEnvironment, userID: user, deviceID: nil)
                #expect(revoked == 0, "a learner of the web alone has no refresh family")
                #expect(
                    try await eventually(within: .seconds(5), every: .milliseconds(100)) {
                        try await me(client, before).status == .unauthorized
                    })
                var later = web("web-revoked")
                later.issuedAt = Date().addingTimeInterval(1)
                let after = try await me(client, try WebLogin.token(later))
                #expect(after.status == .ok && after.json["id"] as? String == id, "\(after.text)")
                return id
            }
            let refused = try await me(other, before)
            #expect(refused.status == .unauthorized && refused.errorCode == "invalid_token", "\(refused.text)")
            var later = web("web-revoked")
            later.issuedAt = Date().addingTimeInterval(1)
            #expect(try await me(other, try WebLogin.token(later)).json["id"] as? String == userID)
        }
    }
}
