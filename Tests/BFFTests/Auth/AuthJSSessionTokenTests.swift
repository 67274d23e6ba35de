import BFFWire
import Foundation
import Hummingbird
import Testing

@testable import BFF
@testable import BFFPlatform

/// The web's Auth.js session token against vectors made by Python from @auth/core's jwt.ts
/// (Vectors/make-authjs-vectors.py): each is read from its cookies as the server reads them,
/// opened with the secrets its environment gives, at its fixed `now`.
@Suite("Auth.js session tokens", .timeLimit(.minutes(3)))
struct AuthJSSessionTokenTests {
    struct Vector {
        let name: String
        let environment: [String: String]
        /// The `Cookie` header a browser would send.
        let cookieHeader: String
        let now: Date
        let accepted: Bool
        /// Why a refused one is (`InvalidWebSessionToken.reason`, or "no cookie").
        let reason: String?
        /// The payload, for an accepted one.
        let claims: [String: Any]?
        /// What `WebLogin.encrypt` needs to make the same token again.
        let mint: [String: Any]?
    }

    static func load() throws -> (version: String, vectors: [Vector]) {
        let url = TestEnvironment.repository.appendingPathComponent("Tests/BFFTests/Auth/Vectors/authjs-session-vectors.json")
        let file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let vectors = try #require(file["vectors"] as? [[String: Any]]).map { vector in
            let cookies = vector["cookies"] as? [String: String] ?? [:]
            return Vector(
                name: vector["name"] as? String ?? "?", environment: vector["environment"] as? [String: String] ?? [:],
                cookieHeader: cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; "),
                now: Date(timeIntervalSince1970: (vector["now"] as? NSNumber)?.doubleValue ?? 0), accepted: vector["outcome"] as? String == "accept",
                reason: vector["reason"] as? String, claims: vector["claims"] as? [String: Any], mint: vector["mint"] as? [String: Any])
        }
        return (file["authjs_core_version"] as? String ?? "?", vectors)
    }

    /// The token the server reads from the vector's cookies, and what it opens it with.
    static func read(_ vector: Vector) throws -> (token: String?, reader: AuthJSSessionToken) {
        let configuration = try WebSessionConfiguration(environment: vector.environment)
        let token = WebSessions.token(in: Cookies(from: [vector.cookieHeader]), named: configuration.cookieName)
        return (token, AuthJSSessionToken(secrets: configuration.secrets, salt: configuration.cookieName))
    }

    static func canonical(_ object: Any) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    @Test("every vector of jwt.ts is accepted with its claims, or refused, as it says; none throws anything but a refusal")
    func everyVector() throws {
        let (version, vectors) = try Self.load()
        #expect(version == "0.41.3", "docs/web-session.md names the version the vectors follow")
        #expect(vectors.filter(\.accepted).count >= 10 && vectors.filter { !$0.accepted }.count >= 30)
        for vector in vectors {
            let (token, reader) = try Self.read(vector)
            if vector.accepted {
                let token = try #require(token, "\(vector.name): no token read from the cookies")
                let expected = try #require(vector.claims)
                let claims = try reader.claims(of: token, now: vector.now)
                let payload = try JSONSerialization.jsonObject(with: try reader.plaintext(of: token))
                #expect(try Self.canonical(payload) == Self.canonical(expected), "\(vector.name)")
                #expect(claims.exp == (expected["exp"] as? NSNumber)?.doubleValue && claims.iat == (expected["iat"] as? NSNumber)?.doubleValue, "\(vector.name)")
                #expect(claims.idpIssuer == expected["idp_iss"] as? String && claims.idpSubject == expected["idp_sub"] as? String, "\(vector.name)")
                #expect(claims.email == expected["email"] as? String && claims.name == expected["name"] as? String, "\(vector.name)")
                #expect(claims.authTime == (expected["auth_time"] as? NSNumber)?.doubleValue && claims.jti == expected["jti"] as? String, "\(vector.name)")
            } else if let token {
                // Refused, and for the reason the vector gives: a tampered header fails at the tag, not before.
                let error = #expect(throws: InvalidWebSessionToken.self, "\(vector.name)") { try reader.claims(of: token, now: vector.now) }
                #expect(error?.reason == vector.reason, "\(vector.name)")
            } else {
                // No token read from the cookies: the request is anonymous.
                #expect(vector.reason == "no cookie", "\(vector.name)")
            }
        }
    }

    @Test("the test's token maker makes the vectors' tokens byte for byte from their plaintext and IV")
    func minterMatchesVectors() throws {
        var minted = 0
        for vector in try Self.load().vectors where vector.accepted {
            guard let mint = vector.mint else { continue }
            let (token, _) = try Self.read(vector)
            let plaintext = Data(try #require(mint["plaintext"] as? String).utf8)
            let ivText = try #require(mint["iv"] as? String)
            let iv = try #require(Base64URL.decode(ivText))
            let made = try WebLogin.encrypt(
                plaintext, secret: try #require(mint["secret"] as? String), salt: try #require(mint["salt"] as? String),
                keyID: (mint["kid"] as? NSNumber)?.boolValue ?? true, iv: iv)
            #expect(made == token, "\(vector.name)")
            minted += 1
        }
        #expect(minted >= 10)
    }

    @Test("a token opens only at its exp plus 15 s, whatever the clock it is read at")
    func expiryLeeway() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var claims = WebLogin.Claims(issuer: "https://idp.example.com", subject: "s")
        claims.issuedAt = now.addingTimeInterval(-100)
        claims.lifetime = 100
        let token = try WebLogin.token(claims)
        let reader = AuthJSSessionToken(secrets: [WebLogin.secret], salt: WebLogin.secureCookie)
        #expect(try reader.claims(of: token, now: now.addingTimeInterval(14)).idpSubject == "s")
        #expect(throws: InvalidWebSessionToken.self) { try reader.claims(of: token, now: now.addingTimeInterval(15)) }
        // Another secret's key, or the other cookie's, opens nothing.
        #expect(throws: InvalidWebSessionToken.self) {
            try AuthJSSessionToken(secrets: ["another"], salt: WebLogin.secureCookie).claims(of: token, now: now)
        }
        #expect(throws: InvalidWebSessionToken.self) {
            try AuthJSSessionToken(secrets: [WebLogin.secret], salt: WebLogin.insecureCookie).claims(of: token, now: now)
        }
    }

    @Test("cookies: the whole one wins, else the chunks in numeric order up to the first gap; an empty one is none")
    func cookieChunks() {
        func token(_ header: String) -> String? { WebSessions.token(in: Cookies(from: [header]), named: "n") }
        #expect(token("n=abc") == "abc")
        #expect(token("n.1=def; n.0=abc; n.2=ghi") == "abcdefghi")
        #expect(token("n.0=abc; n.2=ghi") == "abc")
        #expect(token("n.1=def") == nil)
        #expect(token("n.0=abc; n=whole") == "whole")
        #expect(token("n=") == nil)
        #expect(token("other=abc; n.x=1") == nil)
        #expect(token("n.0=abc; n.10=zzz; n.1=def") == "abcdef")
    }

    @Test("BFF_WEB_AUTH_SECRET then _1, _2, _3 in that order; blank or a numbered one alone stops start-up naming it; the insecure flag names the cookie")
    func configuration() throws {
        let all = try WebSessionConfiguration(environment: [
            "BFF_WEB_AUTH_SECRET_3": "d", "BFF_WEB_AUTH_SECRET": "a", "BFF_WEB_AUTH_SECRET_1": "b", "BFF_WEB_AUTH_SECRET_2": "c",
        ])
        #expect(all.secrets == ["a", "b", "c", "d"] && all.cookieName == "__Secure-authjs.session-token")
        // Byte for byte, as Auth.js derives its key from it.
        #expect(try WebSessionConfiguration(environment: ["BFF_WEB_AUTH_SECRET": " padded "]).secrets == [" padded "])
        #expect(try WebSessionConfiguration(environment: [:]).secrets.isEmpty)
        let insecure = try WebSessionConfiguration(environment: ["BFF_WEB_AUTH_SECRET": "a", "BFF_WEB_AUTH_INSECURE_COOKIE": "true"])
        #expect(insecure.cookieName == "authjs.session-token")
        for (environment, variable) in [
            (["BFF_WEB_AUTH_SECRET": ""], "BFF_WEB_AUTH_SECRET"), (["BFF_WEB_AUTH_SECRET": "a", "BFF_WEB_AUTH_SECRET_2": "  "], "BFF_WEB_AUTH_SECRET_2"),
            (["BFF_WEB_AUTH_SECRET_1": "b"], "BFF_WEB_AUTH_SECRET"), (["BFF_WEB_AUTH_SECRET": "a", "BFF_WEB_AUTH_INSECURE_COOKIE": "yes"], "BFF_WEB_AUTH_INSECURE_COOKIE"),
        ] {
            let error = #expect(throws: ConfigurationError.self) { try WebSessionConfiguration(environment: environment) }
            #expect(error?.variable == variable, "\(environment)")
        }
        // Through the server's whole configuration too: `bff serve` does not start.
        let server: [String: String] = [
            "BFF_DATABASE_URL": "postgres://bff:secret@db.internal:6543/bff", "BFF_JWT_KEYS": "k1:" + Base64URL.encode([UInt8](repeating: 1, count: 32)),
            "BFF_OIDC_ISSUER": "https://idp.example.com", "BFF_OIDC_CLIENT_ID": "mobile", "BFF_OIDC_REDIRECT_URIS": "com.example.app:/oauth/callback",
        ]
        #expect(try AppConfiguration(environment: server).webSession.secrets.isEmpty)
        #expect(try AppConfiguration(environment: server.merging(["BFF_WEB_AUTH_SECRET": "s"]) { $1 }).webSession.secrets == ["s"])
        let refused = #expect(throws: ConfigurationError.self) { try AppConfiguration(environment: server.merging(["BFF_WEB_AUTH_SECRET": ""]) { $1 }) }
        #expect(refused?.variable == "BFF_WEB_AUTH_SECRET")
    }
}
