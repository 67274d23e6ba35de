import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import PostgresNIO
import Testing
@testable import BFF

@Suite("OIDC login")
struct LoginTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    static let redirect = AppLogin.redirect

    @Test("PKCE S256 matches RFC 7636 appendix B; a verifier matches only its own challenge and only when well formed")
    func pkceVector() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        #expect(PKCE.challenge(for: verifier) == challenge)
        #expect(PKCE.verifier(verifier, matches: challenge))
        #expect(!PKCE.verifier(verifier, matches: PKCE.challenge(for: verifier + "A")))
        #expect(!PKCE.verifier(verifier, matches: "not-a-challenge"))
        // 42 characters, and a character outside RFC 7636's alphabet, are no verifiers even when hashed alike.
        let short = String(verifier.dropLast())
        #expect(!PKCE.verifier(short, matches: PKCE.challenge(for: short)))
        let plus = verifier + "+"
        #expect(!PKCE.verifier(plus, matches: PKCE.challenge(for: plus)))
        let long = String(repeating: "a.b~c", count: 25) + "abc"
        #expect(long.count == 128 && PKCE.verifier(long, matches: PKCE.challenge(for: long)))
        #expect(!PKCE.verifier(long + "a", matches: PKCE.challenge(for: long + "a")))
    }

    @Test("the whole login through the running oidc-provider-mock: start → authorize → callback → /me → refresh → logout; nothing secret is logged")
    func endToEnd() async throws {
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_CLIENT_SECRET": "s3cret-client"], logs: logs)
        let observed = try await app.live { client -> [String] in
            // The app makes the verifier and keeps it; the server holds only its challenge.
            let app = AppLogin(deviceID: "iphone-e2e-01")
            var secrets: [String] = [app.verifier]
            let started = try await app.start(with: client)
            let authorizationURL = started.authorizationURL
            let state = started.state
            secrets.append(state)
            #expect(try await pendingChallenges() == [app.challenge])
            let query = started.authorizationQuery
            #expect(query["response_type"] == "code" && query["client_id"] == "bff-tests")
            #expect(query["redirect_uri"] == Self.redirect && query["scope"] == "openid profile email")
            #expect(query["state"] == state && query["code_challenge_method"] == "S256")
            #expect(query["code_challenge"] == app.challenge && (query["nonce"]?.count ?? 0) >= 22)

            // The student signs in at the provider (its form takes a subject).
            var authorize = HTTPClientRequest(url: authorizationURL)
            authorize.method = .POST
            authorize.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            authorize.body = .bytes(ByteBuffer(string: "sub=student-e2e&action=allow"))
            let response = try await HTTPClient.shared.execute(authorize, timeout: .seconds(10))
            #expect(response.status.code == 302)
            let location = try #require(response.headers.first(name: "Location"))
            let back = Dictionary(uniqueKeysWithValues: (URLComponents(string: location)?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
            #expect(back["state"] == state)
            let code = try #require(back["code"])
            secrets.append(code)

            // The provider checks PKCE too: the exchange succeeds only because the server passed on
            // the app's verifier.
            let callback = try await client.execute(uri: app.callbackURI(code: code, state: state), method: .get)
            #expect(callback.status == .ok, "\(callback.text)")
            #expect(callback.headers[.cacheControl] == "no-store")
            let access = try #require(callback.json["access_token"] as? String)
            let refresh = try #require(callback.json["refresh_token"] as? String)
            secrets += [access, refresh]
            #expect(callback.json["expires_in"] as? Int ?? 0 > 800)
            #expect(callback.json["refresh_expires_in"] as? Int ?? 0 > 2_500_000)

            let again = try await client.execute(uri: app.callbackURI(code: code, state: state), method: .get)
            #expect(again.status == .badRequest && again.errorCode == "invalid_state")

            let me = try await client.me(access)
            #expect(me.status == .ok)
            #expect(me.json["email"] as? String == "student-e2e")

            let devices = try await client.execute(uri: "/api/v1/devices", method: .get, headers: [.authorization: "Bearer \(access)"])
            let items = devices.json["items"] as? [[String: Any]] ?? []
            #expect(items.count == 1 && items.first?["device_id"] as? String == "iphone-e2e-01" && items.first?["current"] as? Bool == true)

            let rotated = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"refresh_token":"\#(refresh)","device_id":"iphone-e2e-01"}"#))
            #expect(rotated.status == .ok)
            let newRefresh = try #require(rotated.json["refresh_token"] as? String)
            secrets.append(newRefresh)

            let logout = try await client.execute(uri: "/api/v1/auth/logout", method: .post, headers: [.authorization: "Bearer \(access)"])
            #expect(logout.status == .noContent)
            // The logged-out session's access token is refused at once, not when it expires.
            let afterLogoutMe = try await client.me(access)
            #expect(afterLogoutMe.status == .unauthorized && afterLogoutMe.errorCode == "invalid_token")
            let afterLogout = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"refresh_token":"\#(newRefresh)","device_id":"iphone-e2e-01"}"#))
            #expect(afterLogout.errorCode == "session_revoked")
            return secrets
        }
        let secrets = ["s3cret-client"] + observed
        #expect(secrets.count == 7)
        #expect(try await pendingChallenges().isEmpty, "the login was consumed")
        let everything = logs.all.joined()
        #expect(!logs.all.isEmpty)
        for secret in secrets {
            #expect(!everything.contains(secret), "a secret appeared in the logs")
        }
    }

    /// The PKCE challenges of logins not consumed yet.
    private func pendingChallenges() async throws -> [String] {
        try await database.withClient { client in
            let rows = try await client.query("SELECT code_challenge FROM oidc_logins")
            var challenges: [String] = []
            for try await challenge in rows.decode(String.self) { challenges.append(challenge) }
            return challenges
        }
    }

    @Test("start refuses an unregistered redirect_uri (400), a malformed device_id (422) and a missing, malformed or plain PKCE challenge (422); unknown state is 400")
    func startAndCallbackValidation() async throws {
        let app = try await makeTestApp(database: database)
        let login = AppLogin(deviceID: "iphone-e2e-01")
        let pkce = "code_challenge=\(login.challenge)&code_challenge_method=S256"
        try await app.live { client in
            let redirect = try await client.execute(uri: "/api/v1/auth/start?device_id=iphone-e2e-01&redirect_uri=https://evil.example/cb&\(pkce)", method: .get)
            #expect(redirect.status == .badRequest && redirect.errorCode == "invalid_redirect_uri")
            let device = try await client.execute(uri: "/api/v1/auth/start?device_id=short&redirect_uri=\(Self.redirect)&\(pkce)", method: .get)
            #expect(device.status == .unprocessableContent && device.errorCode == "validation_failed")
            let base = "/api/v1/auth/start?device_id=iphone-e2e-01&redirect_uri=\(Self.redirect)"
            for query in ["", "&code_challenge=\(login.challenge)", "&code_challenge_method=S256",
                          "&code_challenge=\(login.challenge)&code_challenge_method=plain",
                          "&code_challenge=\(login.challenge)&code_challenge_method=s256",
                          "&code_challenge=\(login.challenge.dropLast())&code_challenge_method=S256",
                          "&code_challenge=\(login.challenge)A&code_challenge_method=S256",
                          "&code_challenge=\(login.challenge.dropLast())%2B&code_challenge_method=S256",
                          "&code_challenge=\(login.verifier)\(login.verifier)&code_challenge_method=S256"] {
                let refused = try await client.execute(uri: base + query, method: .get)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(query): \(refused.text)")
            }
            #expect(try await pendingChallenges().isEmpty, "a refused start creates no login")
            let state = try await client.execute(uri: "/api/v1/auth/callback?code=abc&state=never-issued&code_verifier=\(login.verifier)", method: .get)
            #expect(state.status == .badRequest && state.errorCode == "invalid_state")

            // A malformed code or state is 422 and leaves the login to be completed.
            let issued = try await login.start(with: client).state
            let longCode = String(repeating: "c", count: 2049)
            for query in ["code=&state=\(issued)", "code=a%20b&state=\(issued)", "code=\(longCode)&state=\(issued)",
                          "code=abc&state=\(issued)%21", "code=abc&state=\(String(repeating: "s", count: 257))"] {
                let refused = try await client.execute(uri: "/api/v1/auth/callback?\(query)&code_verifier=\(login.verifier)", method: .get)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(query): \(refused.text)")
            }
            let pending = try await database.withClient { client in
                try await client.query("SELECT count(*)::int FROM oidc_logins WHERE state_hash = \(Digest.sha256(issued))")
                    .collect().first?.decode(Int.self)
            }
            #expect(pending == 1)
        }
    }

    @Test("whoever intercepts the redirect holds code and state but not the verifier: 400 invalid_grant, nothing issued, the code never reaches the provider, and the real app must start again")
    func interceptedRedirect() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                for (index, variant) in ["missing", "wrong", "malformed", "another login's", "the challenge itself"].enumerated() {
                    let victim = AppLogin(deviceID: "android-victim-\(index)")
                    let started = try await victim.start(with: client)
                    let code = "code-" + SecureRandom.token()
                    var claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: started.nonce)
                    claims.sub = .init(value: "victim-\(index)")
                    idp.grant(code: code, challenge: victim.challenge, idToken: try await idp.sign(claims))

                    // Another app registered for the same scheme received `?code=…&state=…`.
                    let sent: String? = switch variant {
                    case "missing": nil
                    case "wrong": SecureRandom.token()
                    case "malformed": String(victim.verifier.prefix(42))
                    case "another login's": AppLogin(deviceID: victim.deviceID).verifier
                    default: victim.challenge
                    }
                    let stolen = try await client.execute(uri: victim.callbackURI(code: code, state: started.state, sending: sent), method: .get)
                    #expect(stolen.status == .badRequest && stolen.errorCode == "invalid_grant", "\(variant): \(stolen.text)")
                    #expect(stolen.json["access_token"] == nil && stolen.json["refresh_token"] == nil)

                    // The login is used up: the real app, arriving second with the right verifier, starts again.
                    let real = try await client.execute(uri: victim.callbackURI(code: code, state: started.state), method: .get)
                    #expect(real.status == .badRequest && real.errorCode == "invalid_state", "\(variant): \(real.text)")
                    #expect(idp.tokenRequests.withLockedValue { $0.isEmpty }, "\(variant): the code was never sent to the provider")
                    let subject = claims.sub.value
                    let issued = try await database.withClient { client in
                        try await client.query("""
                            SELECT (SELECT count(*) FROM refresh_families WHERE device_id = \(victim.deviceID))::int
                                 + (SELECT count(*) FROM users WHERE subject = \(subject))::int
                            """).collect().first?.decode(Int.self)
                    }
                    #expect(issued == 0, "\(variant): no account and no session were made")
                }

                // Started again, the real app signs in.
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.sub = "victim-0"
                let again = try await idp.signIn(AppLogin(deviceID: "android-victim-0"), as: claims, with: client)
                #expect(again.status == .ok, "\(again.text)")
            }
        }
    }

    @Test("the server passes the app's verifier to the provider, which refuses a code exchanged with another (401 idp_rejected)")
    func providerChecksPKCE() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                let login = AppLogin(deviceID: "android-pkce-1")
                let ok = try await idp.signIn(login, as: TestIDClaims(iss: .init(value: idp.issuer)), with: client)
                #expect(ok.status == .ok, "\(ok.text)")
                let form = try #require(idp.tokenRequests.withLockedValue { $0.last?.form })
                #expect(form.contains("code_verifier=\(login.verifier)"))

                // The provider granted the code for another challenge than the login's: the server's
                // check passes (the app's verifier matches its own challenge), the provider's does not.
                let started = try await login.start(with: client)
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.nonce = started.nonce
                idp.grant(code: "code-other", challenge: AppLogin(deviceID: "android-pkce-1").challenge, idToken: try await idp.sign(claims))
                let refused = try await client.execute(uri: login.callbackURI(code: "code-other", state: started.state), method: .get)
                #expect(refused.status == .unauthorized && refused.errorCode == "idp_rejected", "\(refused.text)")
            }
        }
    }
}

@Suite("ID and logout tokens")
struct IDTokenTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private func client(_ idp: LocalIdP, clientID: String = "bff-tests") -> OIDCClient {
        OIDCClient(issuer: URL(string: idp.issuer)!, clientID: clientID, clientSecret: nil)
    }

    @Test("refused: wrong nonce, wrong audience, expired, signed by a key outside the JWKS, issuer mismatch; accepted when all hold",
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

    @Test("the callback through a provider of the test's own, its issuer with or without a final /: client_secret_basic, user upserted, refusal is 401 idp_rejected",
          arguments: [false, true])
    func callbackWithLocalProvider(trailingSlash: Bool) async throws {
        try await LocalIdP(trailingSlash: trailingSlash).serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: [
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
            let oidc = OIDCClient(issuer: URL(string: idp.issuer)!, clientID: "bff-tests", clientSecret: nil, jwksRefetchInterval: .seconds(6))
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
            try await Task.sleep(for: .milliseconds(6200))
            await concurrently(unknownKey, valid: false)
            #expect(idp.jwksRequests.withLockedValue { $0 } == 2)
            #expect(idp.discoveryRequests.withLockedValue { $0 } == 1)
        }
    }

    @Test("after a failed JWKS fetch, verifications within the backoff are 'unavailable' without fetching again, a token naming a held key still verifies; then it is fetched anew")
    func failedFetchBackoff() async throws {
        try await LocalIdP().serve { idp in
            let oidc = OIDCClient(
                issuer: URL(string: idp.issuer)!, clientID: "bff-tests", clientSecret: nil,
                jwksRefetchInterval: .zero, fetchFailureBackoff: .seconds(2))
            let claims = TestIDClaims(iss: .init(value: idp.issuer), nonce: "n-1")
            let token = try await idp.sign(claims)
            let unknownKey = try await idp.sign(claims, kid: "rotated-key")

            // No keys held: the failure is the answer until the backoff ends.
            idp.jwksStatus.withLockedValue { $0 = .internalServerError }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
            await #expect(throws: IdPUnavailable.self) { try await oidc.verifyIDToken(token, nonce: "n-1") }
            #expect(idp.jwksRequests.withLockedValue { $0 } == 1)
            idp.jwksStatus.withLockedValue { $0 = .ok }
            try await Task.sleep(for: .milliseconds(2200))
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
                let userID = try await database.withClient { client in
                    for try await id in try await client.query("SELECT id FROM users WHERE subject = 'student-bcl'").decode(UUID.self) { return id }
                    return UUID()
                }
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

@Suite("Devices")
struct DeviceTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private func signIn(_ userID: UUID, on deviceID: String) async throws -> Commands.IssuedPair {
        try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: userID, deviceID: deviceID, scopes: AccessTokens.allScopes)
    }

    private static func refresh(_ pair: Commands.IssuedPair, on deviceID: String, with client: some TestClientProtocol) async throws -> TestResponse {
        try await client.execute(
            uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
            body: ByteBuffer(string: #"{"refresh_token":"\#(pair.refreshToken)","device_id":"\#(deviceID)"}"#))
    }

    @Test("a lost-device report revokes that device's sessions and push tokens; another user's device is 404 and untouched")
    func lostDevice() async throws {
        let alice = UUID(), bob = UUID()
        let alicePhone = try await signIn(alice, on: "alice-phone-1")
        let aliceTablet = try await signIn(alice, on: "alice-tablet-1")
        let bobPhone = try await signIn(bob, on: "bob-phone-01")
        try await database.withClient { client in
            _ = try await client.query("INSERT INTO push_tokens (user_id, token, platform, device_id) VALUES (\(alice), 'tok-a', 'ios', 'alice-phone-1'), (\(bob), 'tok-b', 'android', 'bob-phone-01')")
        }
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            let tablet: HTTPFields = [.authorization: "Bearer \(aliceTablet.accessToken)"]
            let foreign = try await client.execute(uri: "/api/v1/devices/bob-phone-01", method: .delete, headers: tablet)
            #expect(foreign.status == .notFound && foreign.errorCode == "not_found")
            let lost = try await client.execute(uri: "/api/v1/devices/alice-phone-1", method: .delete, headers: tablet)
            #expect(lost.status == .noContent)
            let again = try await client.execute(uri: "/api/v1/devices/alice-phone-1", method: .delete, headers: tablet)
            #expect(again.status == .notFound)
            let list = try await client.execute(uri: "/api/v1/devices", method: .get, headers: tablet)
            #expect((list.json["items"] as? [[String: Any]])?.map { $0["device_id"] as? String } == ["alice-tablet-1"])
            for (pair, device, expected) in [(alicePhone, "alice-phone-1", "session_revoked"), (bobPhone, "bob-phone-01", nil)] {
                #expect(try await Self.refresh(pair, on: device, with: client).errorCode == expected)
            }
            // The lost phone's access token is refused at once; the other sessions keep theirs.
            for (pair, expected) in [(alicePhone, HTTPResponse.Status.unauthorized), (aliceTablet, .ok), (bobPhone, .ok)] {
                let me = try await client.me(pair.accessToken)
                #expect(me.status == expected)
            }
        }
        let tokens = try await database.withClient { client in
            let rows = try await client.query("SELECT token FROM push_tokens ORDER BY token")
            var tokens: [String] = []
            for try await token in rows.decode(String.self) { tokens.append(token) }
            return tokens
        }
        #expect(tokens == ["tok-b"])
    }

    @Test("one device, one account: signing in on a device another account holds moves it and ends that account's sessions and push tokens there, logged as a security event without tokens")
    func deviceTakenOver() async throws {
        let logs = LogCapture()
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(
                database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer, "BFF_REVOCATION_POLL_INTERVAL": "60"], logs: logs)
            try await app.live { client in
                func signIn(_ subject: String, on device: String) async throws -> (access: String, refresh: String, user: UUID) {
                    var claims = TestIDClaims(iss: .init(value: idp.issuer))
                    claims.sub = .init(value: subject)
                    let response = try await idp.signIn(AppLogin(deviceID: device), as: claims, with: client)
                    #expect(response.status == .ok, "\(response.text)")
                    let userID = (response.json["user"] as? [String: Any])?["id"] as? String
                    let user = try #require(userID.flatMap(UUID.init(uuidString:)))
                    return (try #require(response.json["access_token"] as? String), try #require(response.json["refresh_token"] as? String), user)
                }
                func deviceIDs(_ access: String) async throws -> Set<String> {
                    let list = try await client.execute(uri: "/api/v1/devices", method: .get, headers: [.authorization: "Bearer \(access)"])
                    return Set((list.json["items"] as? [[String: Any]] ?? []).compactMap { $0["device_id"] as? String })
                }
                let aikoOnPad = try await signIn("aiko", on: "school-ipad-7")
                let aikoPhone = try await signIn("aiko", on: "aiko-phone-1")
                // The same account signing in again on its own device takes nothing from anyone.
                let aikoAgain = try await signIn("aiko", on: "school-ipad-7")
                #expect(try await client.me(aikoOnPad.access).status == .ok)
                try await database.withClient { client in
                    _ = try await client.query("""
                        INSERT INTO push_tokens (user_id, token, platform, device_id)
                        VALUES (\(aikoPhone.user), 'tok-pad', 'ios', 'school-ipad-7'), (\(aikoPhone.user), 'tok-phone', 'ios', 'aiko-phone-1')
                        """)
                }
                #expect(try await deviceIDs(aikoPhone.access) == ["aiko-phone-1", "school-ipad-7"])

                let benOnPad = try await signIn("ben", on: "school-ipad-7")
                for ended in [aikoOnPad, aikoAgain] {
                    #expect(try await client.me(ended.access).status == .unauthorized, "ended at once, not at the next poll")
                    let refresh = try await client.execute(
                        uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                        body: ByteBuffer(string: #"{"refresh_token":"\#(ended.refresh)","device_id":"school-ipad-7"}"#))
                    #expect(refresh.status == .unauthorized && refresh.errorCode == "session_revoked", "\(refresh.text)")
                }
                #expect(try await client.me(aikoPhone.access).status == .ok)
                #expect(try await client.me(benOnPad.access).status == .ok)
                #expect(try await deviceIDs(aikoPhone.access) == ["aiko-phone-1"])
                #expect(try await deviceIDs(benOnPad.access) == ["school-ipad-7"])
                let lost = try await client.execute(
                    uri: "/api/v1/devices/school-ipad-7", method: .delete, headers: [.authorization: "Bearer \(aikoPhone.access)"])
                #expect(lost.status == .notFound, "the pad is no longer Aiko's to report")

                let tokens = try await database.withClient { client in
                    try await client.query("SELECT token FROM push_tokens ORDER BY token").collect().map { try $0.decode(String.self) }
                }
                #expect(tokens == ["tok-phone"])
                let reasons = try await database.withClient { client in
                    try await client.query("SELECT revoked_reason FROM refresh_families WHERE user_id = \(aikoPhone.user) AND revoked_at IS NOT NULL")
                        .collect().map { try $0.decode(String.self) }
                }
                #expect(reasons == ["device_taken_over", "device_taken_over"])
                let events = logs.entries().filter { $0["event"] as? String == "device_taken_over" }
                #expect(events.count == 1)
                #expect(events.first?["previous_user_ids"] as? [String] == [aikoPhone.user.uuidString])
                for secret in [aikoOnPad.access, aikoOnPad.refresh, benOnPad.access, benOnPad.refresh, "tok-pad"] {
                    #expect(!logs.all.joined().contains(secret))
                }
            }
        }
    }

    @Test("bff auth issue follows the same rule: issuing for another account on a device ends the sessions there")
    func issueTakesTheDevice() async throws {
        let aiko = try await signIn(UUID(), on: "shared-tablet-1")
        let ben = try await signIn(UUID(), on: "shared-tablet-1")
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let aikoRefresh = try await Self.refresh(aiko, on: "shared-tablet-1", with: client)
            let benRefresh = try await Self.refresh(ben, on: "shared-tablet-1", with: client)
            #expect(aikoRefresh.errorCode == "session_revoked")
            #expect(benRefresh.status == .ok)
        }
    }
}
