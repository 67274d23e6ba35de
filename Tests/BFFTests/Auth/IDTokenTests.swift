import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("ID and logout tokens", .needsDatabase, .timeLimit(.minutes(3)))
struct IDTokenTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private func client(_ idp: LocalIdP, clientID: String = "bff-tests") -> OIDCClient {
        OIDCClient(issuer: URL(string: idp.issuer)!, clientID: clientID, clientSecret: nil)
    }

    @Test(
        "refused: wrong nonce, wrong audience, expired, signed by a key outside the JWKS, issuer mismatch; accepted when all hold",
        arguments: ["wrong nonce", "wrong audience", "expired", "unpublished key", "issuer mismatch", "future iat", "long sub", "long sid", "valid"])
    func refusals(_ variant: String) async throws {
        try await LocalIdP().serve { idp in
            var claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-123")
            var published = true
            switch variant {
            case "wrong nonce": claims.nonce = "n-other"
            case "wrong audience": claims.aud = "someone-else"
            case "expired": claims.exp = .init(value: Date().addingTimeInterval(-120)); claims.iat = .init(value: Date().addingTimeInterval(-600))
            case "unpublished key": published = false
            case "issuer mismatch": claims.iss = "https://evil.example"
            case "future iat": claims.iat = .init(value: Date().addingTimeInterval(300))
            case "long sub": claims.sub = .init(value: String(repeating: "s", count: 256))
            case "long sid": claims.sid = String(repeating: "s", count: 256)
            default: break
            }
            let token = try await idp.sign(claims, withPublishedKey: published)
            if variant == "valid" {
                let verified = try await client(idp).verifyIDToken(token, nonce: "n-123")
                #expect(verified.sub.value == "student-42")
            } else {
                await #expect(throws: IdPRejected.self) { try await client(idp).verifyIDToken(token, nonce: "n-123") }
            }
        }
    }

    @Test(
        "the callback through a provider of the test's own, its issuer with or without a final /: client_secret_basic, user upserted, refusal is 401 idp_rejected",
        arguments: [false, true])
    func callbackWithLocalProvider(trailingSlash: Bool) async throws {
        try await LocalIdP(trailingSlash: trailingSlash).serve { [database] idp in
            let app = try await makeTestApp(
                database: database,
                environment: [
                    "BFF_OIDC_ISSUER": idp.issuer, "BFF_OIDC_CLIENT_SECRET": "local-secret",
                ])
            try await app.live { client in
                let login = AppLogin(deviceID: "android-1234")
                let callback = try await idp.signIn(login, as: TestIDClaims(iss: .init(value: idp.issuer)), with: client)
                #expect(callback.status == .ok, "\(callback.text)")
                let user = callback.json["user"] as? [String: Any]
                #expect(user?["email"] as? String == "student42@example.com" && user?["display_name"] as? String == "Student 42")
                let request = try #require(idp.tokenRequests.withLockedValue { $0.last })
                #expect(request.authorization == "Basic " + Data("bff-tests:local-secret".utf8).base64EncodedString())
                #expect(request.form.contains("code_verifier=\(login.verifier)") && request.form.contains("grant_type=authorization_code"))

                // A code the provider refuses.
                let secondState = try await login.start(with: client).state
                let refused = try await client.execute(uri: login.callbackURI(code: "bad", state: secondState), method: .get)
                #expect(refused.status == .unauthorized && refused.errorCode == "idp_rejected")
            }
        }
    }

    @Test("profile claims that do not fit their columns are dropped or shortened, so a login never fails on them")
    func profileClaims() {
        #expect(AuthService.profileText(nil, limit: 200, shorten: true) == nil)
        #expect(AuthService.profileText("  ", limit: 200, shorten: true) == nil)
        #expect(AuthService.profileText(" Aiko\u{0}  ", limit: 200, shorten: true) == "Aiko")
        let long = String(repeating: "あ", count: 199) + "🇯🇵"
        #expect(AuthService.profileText(long, limit: 200, shorten: true) == String(repeating: "あ", count: 199))
        let email = String(repeating: "a", count: 310) + "@example.com"
        #expect(AuthService.profileText(email, limit: 320, shorten: false) == nil)
        #expect(AuthService.profileText("a@example.com", limit: 320, shorten: false) == "a@example.com")
    }

    @Test("concurrent verifications fetch discovery and the JWKS once; tokens naming an unknown key refetch it once, and only after the interval")
    func sharedFetches() async throws {
        try await LocalIdP().serve { idp in
            idp.jwksDelay.withLockedValue { $0 = .milliseconds(200) }
            let clock = ManualClock()
            let oidc = OIDCClient(
                issuer: URL(string: idp.issuer)!, clientID: "bff-tests", clientSecret: nil, jwksRefetchInterval: .seconds(6), now: clock.now)
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            let valid = try await idp.sign(claims)
            let unknownKey = try await idp.sign(claims, kid: "rotated-key")
            @Sendable func concurrently(_ token: String, valid: Bool) async {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<16 {
                        group.addTask {
                            if valid {
                                await #expect(throws: Never.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
                            } else {
                                await #expect(throws: IdPRejected.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
                            }
                        }
                    }
                }
            }
            await concurrently(valid, valid: true)
            #expect(idp.discoveryRequests.withLockedValue { $0 } == 1)
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            await concurrently(unknownKey, valid: false)
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            clock.advance(by: .milliseconds(6200))
            await concurrently(unknownKey, valid: false)
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)
            #expect(idp.discoveryRequests.withLockedValue { $0 } == 1)
        }
    }

    @Test("after a failed JWKS fetch, verifications within the backoff are 'unavailable' without fetching again, a token naming a held key still verifies; then it is fetched anew")
    func failedFetchBackoff() async throws {
        try await LocalIdP().serve { idp in
            let clock = ManualClock()
            let oidc = OIDCClient(
                issuer: URL(string: idp.issuer)!, clientID: "bff-tests", clientSecret: nil,
                jwksRefetchInterval: .zero, fetchFailureBackoff: .seconds(2), now: clock.now)
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            let token = try await idp.sign(claims)
            let unknownKey = try await idp.sign(claims, kid: "rotated-key")

            // No keys held: the failure is the answer until the backoff ends.
            idp.jwksStatus.withLockedValue { $0 = .internalServerError }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            idp.jwksStatus.withLockedValue { $0 = .ok }
            clock.advance(by: .milliseconds(2200))
            #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)

            // Keys held, the provider failing: a token naming a key not held cannot be judged (503,
            // not a refusal), one naming a held key verifies.
            idp.jwksStatus.withLockedValue { $0 = .internalServerError }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(unknownKey, nonce: "n-1") }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(unknownKey, nonce: "n-1") }
            #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 3)
        }
    }

    @Test("a JWKS answer that stalls halfway is given up after the 5 s fetch timeout, not waited for")
    func stalledBody() async throws {
        try await LocalIdP().serve { idp in
            idp.jwksBodyStall.withLockedValue { $0 = .seconds(9) }
            let token = try await idp.sign(TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1"))
            let start = ContinuousClock.now
            await #expect(throws: IdPUnavailable.self) { try await client(idp).verifyIDToken(token, nonce: "n-1") }
            #expect(ContinuousClock.now - start < .seconds(8))
        }
    }

    @Test("an unreachable provider is 503 idp_unavailable")
    func unreachable() async throws {
        let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": "http://127.0.0.1:9"])
        try await app.live { client in
            let start = try await client.execute(uri: AppLogin(deviceID: "android-1234").startURI, method: .get)
            #expect(start.status == .serviceUnavailable && start.errorCode == "idp_unavailable")
        }
    }

    @Test("back-channel logout: a valid logout token revokes the user's sessions and their access tokens; an invalid one is 400 and changes nothing")
    func backchannelLogout() async throws {
        try await LocalIdP().serve { [database] idp in
            // A poll a minute away: the access token below must end by the local record alone.
            let app = try await makeTestApp(
                database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer, "BFF_REVOCATION_POLL_INTERVAL": "60"])
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            try await app.live { client in
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = "student-bcl"
                let login = try await idp.signIn(AppLogin(deviceID: "android-5678"), as: claims, with: client)
                let refresh = try #require(login.json["refresh_token"] as? String)

                var withNonce = TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl")
                withNonce.nonce = "forbidden"
                for bad in [try await idp.sign(withNonce), try await idp.sign(TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl"), withPublishedKey: false), "garbage"] {
                    let refused = try await client.execute(
                        uri: "/api/v1/auth/backchannel-logout", method: .post, headers: form, body: ByteBuffer(string: "logout_token=\(bad)"))
                    #expect(refused.status == .badRequest && refused.errorCode == "invalid_logout_token")
                }
                for malformed in ["logout_token", "a&b"] {
                    let refused = try await client.execute(
                        uri: "/api/v1/auth/backchannel-logout", method: .post, headers: form, body: ByteBuffer(string: malformed))
                    #expect(refused.status == .badRequest && refused.errorCode == "invalid_form", "\(malformed): \(refused.text)")
                }
                let stillValid = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(refresh)","device_id":"android-5678"}"#))
                #expect(stillValid.status == .ok)
                let child = try #require(stillValid.json["refresh_token"] as? String)
                let childAccess = try #require(stillValid.json["access_token"] as? String)
                #expect(try await client.me(childAccess).status == .ok)

                let logoutToken = try await idp.sign(TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl", sid: "idp-session-1"))
                // The provider's Accept need not name JSON: its answer has no body.
                let accepted = try await client.execute(
                    uri: "/api/v1/auth/backchannel-logout", method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded", .accept: "text/plain"],
                    body: ByteBuffer(string: "logout_token=\(logoutToken)"))
                #expect(accepted.status == .ok)
                #expect(accepted.headers[.cacheControl] == "no-store")
                let revoked = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(child)","device_id":"android-5678"}"#))
                #expect(revoked.errorCode == "session_revoked")
                #expect(try await client.me(childAccess).status == .unauthorized)

                // A sub-only token ends every session of the user once; replayed, it ends none of
                // those begun since. A token older than the maximum age (a day) is refused.
                let everySession = try await idp.sign(TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl"))
                let logout = { (token: String) in
                    try await client.execute(
                        uri: "/api/v1/auth/backchannel-logout", method: .post, headers: form, body: ByteBuffer(string: "logout_token=\(token)"))
                }
                #expect(try await logout(everySession).status == .ok)
                let userID = try #require(
                    try await database.withClient { client in
                        try await client.query("SELECT id FROM users WHERE subject = 'student-bcl'").collect().first?.decode(UUID.self)
                    }, "the login made the account")
                let later = try await Commands.issueToken(
                    environment: TestEnvironment.serverEnvironment(database: database, ["BFF_OIDC_ISSUER": idp.issuer, "BFF_LOG_LEVEL": "critical"]),
                    userID: userID, deviceID: "android-5678", scopes: AccessTokens.allScopes)
                #expect(try await logout(everySession).status == .ok)
                let survived = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(later.refreshToken)","device_id":"android-5678"}"#))
                #expect(survived.status == .ok, "\(survived.text)")
                var stale = TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl")
                stale.iat = .init(value: Date().addingTimeInterval(-OIDCClient.logoutTokenMaxAge - 120))
                let old = try await logout(try await idp.sign(stale))
                #expect(old.status == .badRequest && old.errorCode == "invalid_logout_token")
                // A first delivery that arrives late ends the sessions it knew of, not one begun since.
                var late = TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-bcl")
                late.iat = .init(value: Date().addingTimeInterval(-300))
                #expect(try await logout(try await idp.sign(late)).status == .ok)
                let current = try #require(survived.json["refresh_token"] as? String)
                let stillAlive = try await client.execute(
                    uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"refresh_token":"\#(current)","device_id":"android-5678"}"#))
                #expect(stillAlive.status == .ok, "\(stillAlive.text)")
            }
        }
    }
}
