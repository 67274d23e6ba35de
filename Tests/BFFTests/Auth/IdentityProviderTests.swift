import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

/// How the server treats its identity provider: how long it trusts the provider's keys, what it
/// follows, where it sends secrets, and what it requires of the tokens. Only the tests that run the
/// server make a database.
@Suite("Identity provider trust", .timeLimit(.minutes(2)))
struct IdentityProviderTests {

    private static func client(_ idp: LocalIdP, refetchInterval: Duration, clock: ManualClock = ManualClock()) -> OIDCClient {
        OIDCClient(
            issuer: URL(string: idp.issuer)!, clientID: "bff-tests", clientSecret: nil, jwksRefetchInterval: refetchInterval, now: clock.now)
    }

    @Test("a key the provider withdrew stops being trusted once the JWKS's max-age has passed")
    func withdrawnKeyGoesStale() async throws {
        try await LocalIdP().serve { idp in
            idp.jwksCacheControl.withLockedValue { $0 = "public, max-age=1" }
            let clock = ManualClock()
            let oidc = Self.client(idp, refetchInterval: .seconds(1), clock: clock)
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            let signedByOldKey = try await idp.sign(claims)
            #expect(try await oidc.verifyIDToken(signedByOldKey, nonce: "n-1").sub.value == "student-42")
            idp.rotatePublishedKey(kid: "next-key")
            // Within the max-age the held set still answers: no fetch per token.
            #expect(try await oidc.verifyIDToken(signedByOldKey, nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            clock.advance(by: .milliseconds(1200))
            await #expect(throws: IdPRejected.self) { try await oidc.verifyIDToken(signedByOldKey, nonce: "n-1") }
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)
            #expect(try await oidc.verifyIDToken(try await idp.sign(claims), nonce: "n-1").sub.value == "student-42")
        }
    }

    @Test("without Cache-Control the JWKS is kept for an hour, not fetched per token")
    func defaultMaxAge() async throws {
        try await LocalIdP().serve { idp in
            let clock = ManualClock()
            let oidc = Self.client(idp, refetchInterval: .seconds(1), clock: clock)
            let token = try await idp.sign(TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1"))
            #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            // Just short of the default hour: still held.
            clock.advance(by: .seconds(3599))
            #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            // Past it: fetched again.
            clock.advance(by: .seconds(2))
            #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)
        }
        #expect(OIDCClient.maxAge(cacheControl: []) == nil)
        #expect(OIDCClient.maxAge(cacheControl: ["public, max-age=600"]) == .seconds(600))
        #expect(OIDCClient.maxAge(cacheControl: ["max-age=\"30\""]) == .seconds(30))
        #expect(OIDCClient.maxAge(cacheControl: ["public", "MAX-AGE=5"]) == .seconds(5))
        #expect(OIDCClient.maxAge(cacheControl: ["max-age=600, no-cache"]) == .zero)
        #expect(OIDCClient.maxAge(cacheControl: ["no-store"]) == .zero)
        #expect(OIDCClient.maxAge(cacheControl: ["max-age=-1", "max-age=soon"]) == nil)
    }

    @Test("a provider that rotates its key under the same kid: a failed signature check fetches the JWKS once more and the new key verifies; a forged token still fails")
    func keyRotatedUnderTheSameKid() async throws {
        try await LocalIdP().serve { idp in
            let oidc = Self.client(idp, refetchInterval: .zero)
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            #expect(try await oidc.verifyIDToken(try await idp.sign(claims), nonce: "n-1").sub.value == "student-42")
            idp.rotatePublishedKey()
            #expect(try await oidc.verifyIDToken(try await idp.sign(claims), nonce: "n-1").sub.value == "student-42")
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)
            let forged = try await idp.sign(claims, withPublishedKey: false, kid: idp.publishedKID)
            await #expect(throws: IdPRejected.self) { try await oidc.verifyIDToken(forged, nonce: "n-1") }
            #expect(idp.jwksRequests.withLockedValue { $0 } == 3)
        }
    }

    @Test("the re-fetch after a failed signature check is rate limited like an unknown kid's: forged tokens within the interval fetch nothing")
    func signatureRefetchIsRateLimited() async throws {
        try await LocalIdP().serve { idp in
            let oidc = Self.client(idp, refetchInterval: .seconds(60))
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            #expect(try await oidc.verifyIDToken(try await idp.sign(claims), nonce: "n-1").sub.value == "student-42")
            let forged = try await idp.sign(claims, withPublishedKey: false, kid: idp.publishedKID)
            for _ in 0..<5 {
                await #expect(throws: IdPRejected.self) { try await oidc.verifyIDToken(forged, nonce: "n-1") }
            }
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
        }
    }

    @Test("a token endpoint that redirects is not followed: the code and verifier go nowhere else, and the login is 503 idp_unavailable", .needsDatabase)
    func tokenEndpointRedirectNotFollowed() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        try await LocalIdP().serve { idp in
            idp.tokenEndpointOverride.withLockedValue { $0 = "\(idp.base)/token-moved" }
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                let login = AppLogin(deviceID: "android-redirect-1")
                let response = try await idp.signIn(login, as: TestIDClaims(iss: .init(value: idp.issuer)), with: client)
                #expect(response.status == .serviceUnavailable && response.errorCode == "idp_unavailable", "\(response.text)")
            }
            #expect(idp.redirectedTokenRequests.withLockedValue { $0 } == 0)
        }
    }

    @Test("discovery naming a token endpoint or JWKS elsewhere over plain http is refused (503), even for a development issuer on this host", .needsDatabase)
    func plainHTTPEndpointsRefused() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        for field in ["token_endpoint", "jwks_uri"] {
            try await LocalIdP().serve { idp in
                let elsewhere = "http://idp.example.net/\(field)"
                if field == "token_endpoint" {
                    idp.tokenEndpointOverride.withLockedValue { $0 = elsewhere }
                } else {
                    idp.jwksURIOverride.withLockedValue { $0 = elsewhere }
                }
                let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
                try await app.live { client in
                    let response = try await client.execute(uri: AppLogin(deviceID: "android-http-01").startURI, method: .get)
                    #expect(response.status == .serviceUnavailable && response.errorCode == "idp_unavailable", "\(field): \(response.text)")
                }
            }
        }
    }

    @Test("for an https issuer, discovery's token endpoint and JWKS must be https, wherever they are")
    func httpsIssuerEndpoints() throws {
        func metadata(token: String, jwks: String) -> OIDCClient.Metadata {
            .init(issuer: "https://idp.example.com", authorizationEndpoint: "https://idp.example.com/authorize", tokenEndpoint: token, jwksURI: jwks)
        }
        let issuer = "https://idp.example.com"
        #expect(throws: Never.self) {
            try OIDCClient.requireSecureEndpoints(metadata(token: "https://idp.example.com/token", jwks: "https://keys.example.com/jwks"), issuer: issuer)
        }
        for (token, jwks) in [
            ("http://idp.example.com/token", "https://idp.example.com/jwks"),
            ("https://idp.example.com/token", "http://idp.example.com/jwks"),
            ("http://127.0.0.1/token", "https://idp.example.com/jwks"),
            ("https://idp.example.com/token", "not a url"),
        ] {
            #expect(throws: IdPUnavailable.self, "\(token) \(jwks)") {
                try OIDCClient.requireSecureEndpoints(metadata(token: token, jwks: jwks), issuer: issuer)
            }
        }
    }

    @Test(
        "an ID token for several audiences must name this client in azp; an azp naming another party is refused",
        arguments: ["two audiences, no azp", "two audiences, azp another", "one audience, azp another", "two audiences, azp us", "one audience, azp us"])
    func authorizedParty(_ variant: String) async throws {
        try await LocalIdP().serve { idp in
            var claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            if variant.hasPrefix("two") { claims.aud = .init(value: ["bff-tests", "another-client"]) }
            if variant.hasSuffix("azp another") { claims.azp = "another-client" }
            if variant.hasSuffix("azp us") { claims.azp = "bff-tests" }
            let token = try await idp.sign(claims)
            let oidc = Self.client(idp, refetchInterval: .seconds(60))
            if variant.hasSuffix("azp us") {
                #expect(try await oidc.verifyIDToken(token, nonce: "n-1").sub.value == "student-42")
            } else {
                await #expect(throws: IdPRejected.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
            }
        }
    }

    @Test("a logout token without exp, expired, or whose back-channel event is not an object, is 400 and ends nothing", .needsDatabase)
    func logoutTokenClaims() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        try await LocalIdP().serve { idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = "student-claims"
                let login = try await idp.signIn(AppLogin(deviceID: "android-claims-1"), as: claims, with: client)
                let access = try #require(login.json["access_token"] as? String)
                for variant in ["no exp", "event is a string", "expired"] {
                    var logout = TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-claims")
                    switch variant {
                    case "no exp": logout.exp = nil
                    case "event is a string": logout.events = ["http://schemas.openid.net/event/backchannel-logout": .string("logout")]
                    default: logout.exp = .init(value: Date().addingTimeInterval(-120))
                    }
                    let refused = try await client.execute(
                        uri: "/api/v1/auth/backchannel-logout", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                        body: ByteBuffer(string: "logout_token=\(try await idp.sign(logout))"))
                    #expect(refused.status == .badRequest && refused.errorCode == "invalid_logout_token", "\(variant): \(refused.text)")
                }
                #expect(try await client.me(access).status == .ok)
                // The control: the same token, well formed, ends the session.
                let valid = try await client.execute(
                    uri: "/api/v1/auth/backchannel-logout", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                    body: ByteBuffer(string: "logout_token=\(try await idp.sign(TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-claims")))"))
                #expect(valid.status == .ok)
                #expect(try await client.me(access).status == .unauthorized)
            }
        }
    }

    @Test("a logout token naming an IdP session ends that session's families even when they began after the token was issued; a sub-only one does not", .needsDatabase)
    func sessionNamedLogoutHasNoCreationWindow() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        try await LocalIdP().serve { idp in
            let app = try await makeTestApp(
                database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer, "BFF_REVOCATION_POLL_INTERVAL": "60"])
            let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
            try await app.live { client in
                func signIn(_ sid: String, device: String) async throws -> String {
                    var claims = TestIDClaims(iss: .init(value: idp.issuer))
                    claims.sub = "student-window"
                    claims.sid = sid
                    let login = try await idp.signIn(AppLogin(deviceID: device), as: claims, with: client)
                    #expect(login.status == .ok, "\(login.text)")
                    return try #require(login.json["access_token"] as? String)
                }
                let named = try await signIn("idp-session-named", device: "android-window-1")
                let other = try await signIn("idp-session-other", device: "android-window-2")
                // Issued five minutes ago, before either login began.
                var bySession = TestLogoutClaims(iss: .init(value: idp.issuer), sid: "idp-session-named")
                bySession.iat = .init(value: Date().addingTimeInterval(-300))
                var bySubject = TestLogoutClaims(iss: .init(value: idp.issuer), sub: "student-window")
                bySubject.iat = .init(value: Date().addingTimeInterval(-300))
                for token in [bySession, bySubject] {
                    let response = try await client.execute(
                        uri: "/api/v1/auth/backchannel-logout", method: .post, headers: form,
                        body: ByteBuffer(string: "logout_token=\(try await idp.sign(token))"))
                    #expect(response.status == .ok, "\(response.text)")
                }
                #expect(try await client.me(named).status == .unauthorized)
                #expect(try await client.me(other).status == .ok)
            }
        }
    }
}
