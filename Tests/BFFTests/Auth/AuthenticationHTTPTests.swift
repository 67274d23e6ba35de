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

    @Test("an AppJWT is a Bearer credential only: in a cookie, the retired bff_session or the web's, it is nobody")
    func noAppJWTCookie() async throws {
        let pair = try await issue()
        let app = try await makeTestApp(database: database, environment: WebLogin.environment)
        try await app.live { client in
            for cookie in ["bff_session=\(pair.accessToken)", "__Secure-authjs.session-token=\(pair.accessToken)"] {
                let response = try await client.execute(uri: "/api/v1/me", method: .get, headers: [.cookie: cookie])
                #expect(response.status == .unauthorized && response.errorCode == "invalid_token", "\(cookie.prefix(20))")
            }
            #expect(try await client.me(pair.accessToken).status == .ok)
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
