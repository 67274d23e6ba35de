import BFFWire
import Crypto
import Foundation
import HTTPTypes
import _CryptoExtras

@testable import BFF

/// The web's side of its login (docs/web-session.md), for tests: the session token Auth.js's
/// `jwt.ts` `encode` makes after the web's `jwt` callback, and the cookies its `SessionStore` sets.
/// The vectors of `AuthJSSessionTokenTests`, made by Python from jwt.ts, check this against an
/// implementation that is not the server's.
enum WebLogin {
    /// The web's `AUTH_SECRET` in the tests (`BFF_WEB_AUTH_SECRET`).
    static let secret = "web-test-secret-Qm9ndXMgc2VjcmV0IGZvciB0ZXN0cw=="
    static let secureCookie = "__Secure-authjs.session-token"
    static let insecureCookie = "authjs.session-token"
    /// cookie.ts: `ALLOWED_COOKIE_SIZE - ESTIMATED_EMPTY_COOKIE_SIZE`.
    static let chunkSize = 4096 - 160
    /// A server environment that reads the web's cookie.
    static let environment = ["BFF_WEB_AUTH_SECRET": secret]

    /// What the web's `jwt` callback leaves in the token, and jwt.ts's `iat` and `exp`.
    struct Claims {
        var idpIssuer: String?
        var idpSubject: String?
        var email: String? = "web-learner@example.com"
        var name: String? = "Web Learner"
        var authTime: Date?
        var issuedAt = Date()
        /// Auth.js's default `maxAge`.
        var lifetime: TimeInterval = 30 * 86_400
        /// Something large, to make the token take several cookies.
        var picture: String?

        init(issuer: String?, subject: String?) {
            idpIssuer = issuer
            idpSubject = subject
        }

        func json() throws -> Data {
            let issued = Int(issuedAt.timeIntervalSince1970.rounded(.down))
            // Auth.js's own `sub` is a random id, not the IdP's.
            var object: [String: Any] = [
                "sub": UUID().uuidString.lowercased(), "iat": issued, "exp": issued + Int(lifetime), "jti": UUID().uuidString.lowercased(),
            ]
            if let idpIssuer { object["idp_iss"] = idpIssuer }
            if let idpSubject { object["idp_sub"] = idpSubject }
            if let email { object["email"] = email }
            if let name { object["name"] = name }
            if let picture { object["picture"] = picture }
            if let authTime { object["auth_time"] = Int(authTime.timeIntervalSince1970.rounded(.down)) }
            return try JSONSerialization.data(withJSONObject: object)
        }
    }

    /// jose's compact JWE as jwt.ts makes it: `alg: dir`, `enc: A256CBC-HS512`, the header's `kid`
    /// the key's thumbprint (left out with `keyID: false`, as no Auth.js release writes it).
    static func encrypt(
        _ plaintext: Data, secret: String = WebLogin.secret, salt: String = WebLogin.secureCookie, keyID: Bool = true,
        iv: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    ) throws -> String {
        let key = AuthJSSessionToken.key(secret: secret, salt: salt)
        var header = #"{"alg":"dir","enc":"A256CBC-HS512""#
        if keyID { header += #","kid":"\#(key.id)""# }
        header += "}"
        let protected = Base64URL.encode(Array(header.utf8))
        let ciphertext = try AES._CBC.encrypt(plaintext, using: key.encryption, iv: try AES._CBC.IV(ivBytes: iv))
        let aad = Array(protected.utf8)
        let bits = UInt64(aad.count) * 8
        var mac = HMAC<SHA512>(key: key.mac)
        mac.update(data: aad)
        mac.update(data: iv)
        mac.update(data: ciphertext)
        mac.update(data: (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) })
        let tag = Array(mac.finalize()).prefix(32)
        return [protected, "", Base64URL.encode(iv), Base64URL.encode(ciphertext), Base64URL.encode(tag)].joined(separator: ".")
    }

    static func token(_ claims: Claims, secret: String = WebLogin.secret, salt: String = WebLogin.secureCookie) throws -> String {
        try encrypt(try claims.json(), secret: secret, salt: salt)
    }

    /// The `Cookie` header a browser sends with `token`: one cookie, or Auth.js's chunks
    /// `name.0`, `name.1`, … when it is larger than one may be.
    static func cookie(_ token: String, name: String = WebLogin.secureCookie) -> String {
        guard token.count > chunkSize else { return "\(name)=\(token)" }
        var chunks: [String] = []
        var rest = Substring(token)
        while !rest.isEmpty {
            chunks.append("\(name).\(chunks.count)=\(rest.prefix(chunkSize))")
            rest = rest.dropFirst(chunkSize)
        }
        return chunks.joined(separator: "; ")
    }

    /// Headers of a request the web's page makes through its own origin.
    static func headers(_ token: String, name: String = WebLogin.secureCookie, origin: String? = "https://app.example.com") -> HTTPFields {
        var headers: HTTPFields = [.cookie: cookie(token, name: name), .contentType: "application/json"]
        if let origin { headers[.origin] = origin }
        return headers
    }
}
