import Foundation
import HummingbirdTesting
import Testing

@testable import BFF
@testable import BFFPlatform

/// The app's side of a login (RFC 7636, RFC 8252): it makes the PKCE verifier, keeps it, and sends
/// `/auth/start` only its S256 challenge; the verifier goes to `/auth/callback` with the code.
struct AppLogin: Sendable {
    static let redirect = "com.example.app:/oauth/callback"
    let deviceID: String
    let verifier: String
    /// Asks the IdP to authenticate the learner again (`reauthenticate=true`).
    var reauthenticate = false

    init(deviceID: String, verifier: String = SecureRandom.token(), reauthenticate: Bool = false) {
        self.deviceID = deviceID
        self.verifier = verifier
        self.reauthenticate = reauthenticate
    }

    var challenge: String { PKCE.challenge(for: verifier) }

    var startURI: String {
        "/api/v1/auth/start?device_id=\(deviceID)&redirect_uri=\(Self.redirect)&code_challenge=\(challenge)&code_challenge_method=S256"
            + (reauthenticate ? "&reauthenticate=true" : "")
    }

    /// The callback as the app sends it.
    func callbackURI(code: String, state: String) -> String {
        callbackURI(code: code, state: state, sending: verifier)
    }

    /// The callback with `verifier` in place of the app's; nil leaves it out, as an interceptor would.
    func callbackURI(code: String, state: String, sending verifier: String?) -> String {
        "/api/v1/auth/callback?code=\(code)&state=\(state)" + (verifier.map { "&code_verifier=\($0)" } ?? "")
    }

    /// Starts the login; fails the test unless the server answers 200.
    func start(with client: some TestClientProtocol) async throws -> StartedLogin {
        let response = try await client.execute(uri: startURI, method: .get)
        #expect(response.status == .ok, "\(response.text)")
        let url = try #require(response.json["authorization_url"] as? String)
        let query = Dictionary(
            (URLComponents(string: url)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
        return StartedLogin(
            state: try #require(response.json["state"] as? String), authorizationURL: url, authorizationQuery: query)
    }
}

/// A login `/auth/start` created, as the app sees it.
struct StartedLogin: Sendable {
    let state: String
    let authorizationURL: String
    /// The authorization request's parameters (`nonce`, `code_challenge`, …).
    let authorizationQuery: [String: String]
    var nonce: String? { authorizationQuery["nonce"] }
}

extension LocalIdP {
    /// A whole login through this provider: the app starts it, the learner signs in as `claims`
    /// (the login's nonce filled in) and the provider grants a code, and the app calls back with its
    /// verifier. Returns the callback's answer.
    func signIn(_ login: AppLogin, as claims: TestIDClaims, with client: some TestClientProtocol) async throws -> TestResponse {
        let started = try await login.start(with: client)
        var claims = claims
        claims.nonce = started.nonce
        let code = "code-" + SecureRandom.token()
        grant(code: code, challenge: try #require(started.authorizationQuery["code_challenge"]), idToken: try await sign(claims))
        return try await client.execute(uri: login.callbackURI(code: code, state: started.state), method: .get)
    }
}
