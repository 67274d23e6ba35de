import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Authentication over HTTP", .needsDatabase, .timeLimit(.minutes(3)))
struct AuthenticationHTTPTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    func issue(scopes: [String] = AccessTokens.allScopes) async throws -> Commands.IssuedPair {
        try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: UUID(), deviceID: "device-\(UUID().uuidString.prefix(8))", scopes: scopes)
    }

    @Test("401 invalid_token with WWW-Authenticate for a missing or bad token; 403 insufficient_scope without the scope")
    func unauthorizedAndForbidden() async throws {
        let full = try await issue()
        let chatOnly = try await issue(scopes: ["chat:rw"])
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let missing = try await client.execute(uri: "/api/v1/me", method: .get)
            #expect(missing.status == .unauthorized && missing.errorCode == "invalid_token")
            #expect(missing.headers[.wwwAuthenticate] == "Bearer error=\"invalid_token\"")
            let bad = try await client.me("x.y.z")
            #expect(bad.status == .unauthorized && bad.errorCode == "invalid_token")
            let basic = try await client.execute(uri: "/api/v1/me", method: .get, headers: [.authorization: "Basic abc"])
            #expect(basic.status == .unauthorized)
            let forbidden = try await client.me(chatOnly.accessToken)
            #expect(forbidden.status == .forbidden && forbidden.errorCode == "insufficient_scope")
            let me = try await client.me(full.accessToken)
            #expect(me.status == .ok)
            #expect(me.json["plan"] as? String == "free")
            #expect(me.json["subscription"] == nil || me.json["subscription"] is NSNull)
        }
    }

    @Test("the bff_session cookie works when there is no Bearer header; a present Bearer header alone decides")
    func cookieFallbackAndBearerPriority() async throws {
        let pair = try await issue()
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let cookie = try await client.execute(uri: "/api/v1/me", method: .get, headers: [.cookie: "bff_session=\(pair.accessToken)"])
            #expect(cookie.status == .ok)
            let both = try await client.execute(
                uri: "/api/v1/me", method: .get,
                headers: [
                    .authorization: "Bearer invalid.token.here", .cookie: "bff_session=\(pair.accessToken)",
                ])
            #expect(both.status == .unauthorized)
        }
    }

    @Test("a cookie-authenticated unsafe request needs an allow-listed Origin (403 origin_not_allowed, nothing done); safe methods and Bearer do not")
    func cookieRequiresOrigin() async throws {
        let pair = try await issue()
        let app = try await makeTestApp(database: database, environment: ["BFF_CORS_ORIGINS": "https://app.example.com"])
        try await app.live { client in
            let cookie: HTTPFields = [.cookie: "bff_session=\(pair.accessToken)", .contentType: "application/json"]
            func create(_ extra: HTTPFields) async throws -> TestResponse {
                var headers = cookie
                headers.append(contentsOf: extra)
                return try await client.execute(uri: "/api/v1/chats", method: .post, headers: headers, body: ByteBuffer(string: "{}"))
            }
            for origin in [nil, "null", "https://evil.example", "https://app.example.com.evil.example", "http://app.example.com"] {
                let refused = try await create(origin.map { [.origin: $0] } ?? [:])
                #expect(refused.status == .forbidden && refused.errorCode == "origin_not_allowed", "\(origin ?? "no Origin"): \(refused.text)")
            }
            let logout = try await client.execute(uri: "/api/v1/auth/logout", method: .post, headers: cookie)
            #expect(logout.status == .forbidden && logout.errorCode == "origin_not_allowed")
            let listed = try await client.execute(uri: "/api/v1/chats", method: .get, headers: cookie)
            #expect(listed.status == .ok && (listed.json["items"] as? [Any])?.isEmpty == true, "a refused request created nothing")
            let allowed = try await create([.origin: "https://app.example.com"])
            #expect(allowed.status == .created, "\(allowed.text)")
            let bearer = try await client.execute(
                uri: "/api/v1/chats", method: .post,
                headers: [.authorization: "Bearer \(pair.accessToken)", .contentType: "application/json"], body: ByteBuffer(string: "{}"))
            #expect(bearer.status == .created, "\(bearer.text)")
            // An invalid cookie acts as nobody: 401, as without one.
            let invalid = try await client.execute(
                uri: "/api/v1/chats", method: .post, headers: [.cookie: "bff_session=not.a.token", .contentType: "application/json"],
                body: ByteBuffer(string: "{}"))
            #expect(invalid.status == .unauthorized && invalid.errorCode == "invalid_token")
        }
    }

    @Test("logout ends this device's session and unregisters its push tokens; the user's other devices keep theirs")
    func logoutRemovesPushTokens() async throws {
        let user = UUID()
        let environment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let phone = try await Commands.issueToken(environment: environment, userID: user, deviceID: "logout-phone-1", scopes: AccessTokens.allScopes)
        let tablet = try await Commands.issueToken(environment: environment, userID: user, deviceID: "logout-tablet-1", scopes: AccessTokens.allScopes)
        try await database.withClient { client in
            _ = try await client.query(
                """
                INSERT INTO push_tokens (user_id, token, platform, device_id)
                VALUES (\(user), 'tok-phone', 'ios', 'logout-phone-1'), (\(user), 'tok-tablet', 'android', 'logout-tablet-1')
                """)
        }
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let logout = try await client.execute(uri: "/api/v1/auth/logout", method: .post, headers: [.authorization: "Bearer \(phone.accessToken)"])
            #expect(logout.status == .noContent)
            #expect(try await client.me(phone.accessToken).status == .unauthorized)
            #expect(try await client.me(tablet.accessToken).status == .ok)
        }
        let tokens = try await database.withClient { client in
            try await client.query("SELECT token FROM push_tokens WHERE user_id = \(user) ORDER BY token").collect().map { try $0.decode(String.self) }
        }
        #expect(tokens == ["tok-tablet"])
    }

    @Test("bff auth revoke ends every session of a user, or every session on a device, and says how many")
    func operatorRevoke() async throws {
        let environment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let aiko = UUID(), ben = UUID()
        let aikoPhone = try await Commands.issueToken(environment: environment, userID: aiko, deviceID: "revoke-aiko-1", scopes: AccessTokens.allScopes)
        let aikoPad = try await Commands.issueToken(environment: environment, userID: aiko, deviceID: "revoke-aiko-2", scopes: AccessTokens.allScopes)
        let benPhone = try await Commands.issueToken(environment: environment, userID: ben, deviceID: "revoke-ben-01", scopes: AccessTokens.allScopes)
        #expect(try await Commands.revoke(environment: environment, userID: aiko, deviceID: nil) == 2)
        #expect(try await Commands.revoke(environment: environment, userID: aiko, deviceID: nil) == 0, "nothing left to revoke")
        #expect(try await Commands.revoke(environment: environment, userID: nil, deviceID: "revoke-ben-01") == 1)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            for (pair, device) in [(aikoPhone, "revoke-aiko-1"), (aikoPad, "revoke-aiko-2"), (benPhone, "revoke-ben-01")] {
                let refresh = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(pair.refreshToken)","device_id":"\#(device)"}"#))
                #expect(refresh.status == .unauthorized && refresh.errorCode == "session_revoked", "\(device): \(refresh.text)")
                // Revoked before this server started: its first poll already knew.
                #expect(try await client.me(pair.accessToken).status == .unauthorized)
            }
        }
    }
}
