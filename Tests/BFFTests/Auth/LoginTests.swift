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

@Suite("OIDC login", .needsDatabase, .timeLimit(.minutes(3)))
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
            for query in [
                "", "&code_challenge=\(login.challenge)", "&code_challenge_method=S256",
                "&code_challenge=\(login.challenge)&code_challenge_method=plain",
                "&code_challenge=\(login.challenge)&code_challenge_method=s256",
                "&code_challenge=\(login.challenge.dropLast())&code_challenge_method=S256",
                "&code_challenge=\(login.challenge)A&code_challenge_method=S256",
                "&code_challenge=\(login.challenge.dropLast())%2B&code_challenge_method=S256",
                "&code_challenge=\(login.verifier)\(login.verifier)&code_challenge_method=S256",
            ] {
                let refused = try await client.execute(uri: base + query, method: .get)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(query): \(refused.text)")
            }
            #expect(try await pendingChallenges().isEmpty, "a refused start creates no login")
            let state = try await client.execute(uri: "/api/v1/auth/callback?code=abc&state=never-issued&code_verifier=\(login.verifier)", method: .get)
            #expect(state.status == .badRequest && state.errorCode == "invalid_state")

            // A malformed code or state is 422 and leaves the login to be completed.
            let issued = try await login.start(with: client).state
            let longCode = String(repeating: "c", count: 2049)
            for query in [
                "code=&state=\(issued)", "code=a%20b&state=\(issued)", "code=\(longCode)&state=\(issued)",
                "code=abc&state=\(issued)%21", "code=abc&state=\(String(repeating: "s", count: 257))",
            ] {
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
                    let sent: String? =
                        switch variant {
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
                        try await client.query(
                            """
                            SELECT (SELECT count(*) FROM refresh_families WHERE device_id = \(victim.deviceID))::int
                                 + (SELECT count(*) FROM users WHERE subject = \(subject))::int
                            """
                        ).collect().first?.decode(Int.self)
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

    @Test("an expired login is 400 invalid_state, used up, and the provider is never asked")
    func expiredLogin() async throws {
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer])
            try await app.live { client in
                let login = AppLogin(deviceID: "android-expired-1")
                let started = try await login.start(with: client)
                // Ten minutes and a second later.
                try await database.withClient { client in
                    _ = try await client.query(
                        """
                        UPDATE oidc_logins SET created_at = now() - interval '11 minutes', expires_at = now() - interval '1 second'
                        WHERE state_hash = \(Digest.sha256(started.state))
                        """)
                }
                let late = try await client.execute(uri: login.callbackURI(code: "code-late", state: started.state), method: .get)
                #expect(late.status == .badRequest && late.errorCode == "invalid_state", "\(late.text)")
                #expect(idp.tokenRequests.withLockedValue { $0.isEmpty })
                #expect(try await pendingChallenges().isEmpty, "the expired login is used up")
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
