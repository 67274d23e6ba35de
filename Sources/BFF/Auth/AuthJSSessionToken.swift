import BFFWire
import Crypto
import Foundation
import _CryptoExtras

/// A web session token that failed; the reason is for tests and logs, never for the client.
struct InvalidWebSessionToken: Error, CustomStringConvertible {
    let reason: String
    var description: String { "invalid web session token: \(reason)" }
}

/// The claims of the web's session token that the BFF reads; the rest of what the web's `jwt`
/// callback writes is ignored.
struct AuthJSClaims: Decodable, Sendable, Equatable {
    /// Seconds since 1970, as jose writes them.
    var exp: Double
    var iat: Double
    var jti: String?
    /// The IdP's issuer and subject, written by the web's `jwt` callback at sign-in: Auth.js's own
    /// `sub` is an id of its own, not the IdP's.
    var idpIssuer: String?
    var idpSubject: String?
    var email: String?
    var name: String?
    /// The IdP's `auth_time` at the sign-in, copied by the same callback.
    var authTime: Double?

    enum CodingKeys: String, CodingKey {
        case exp, iat, jti, email, name
        case idpIssuer = "idp_iss"
        case idpSubject = "idp_sub"
        case authTime = "auth_time"
    }
}

/// Opens the session token of the web's Next.js + Auth.js v5 login, exactly as `@auth/core`'s
/// `jwt.ts` makes it (docs/web-session.md pins the version): a compact JWE, `alg: dir`,
/// `enc: A256CBC-HS512` (RFC 7518 §5.2.5), its key derived from the web's secret by HKDF-SHA256.
///
/// jwt-kit has no JWE, so this one decryption is written here, on swift-crypto's HKDF, HMAC and
/// AES-CBC: the one exception to the rule that this code base writes no JWT code of its own. It
/// follows jwt.ts, not the whole of RFC 7516: only what Auth.js makes is accepted (no A256GCM,
/// which Auth.js would also read, no other algorithm, no `zip` or `crit`). The tag is compared in
/// constant time before anything is decrypted, so a forged token never reaches the padding.
struct AuthJSSessionToken: Sendable {
    /// One secret's key, derived once: the key id Auth.js writes in `kid`, and the two halves.
    struct Key: Sendable {
        let id: String
        let mac: SymmetricKey
        let encryption: SymmetricKey
    }

    /// In the configured order (`BFF_WEB_AUTH_SECRET`, then `_1`…`_3`): a token names its key by
    /// `kid`; one without is tried with the first alone, as jwt.ts's `decode` does.
    let keys: [Key]
    /// jwt.ts's `clockTolerance`.
    static let leeway: TimeInterval = 15
    /// Longer input is refused before any work: four of Auth.js's 3,936-character cookie chunks fit.
    static let maximumLength = 16_384

    /// `salt` is the cookie's base name, as jwt.ts takes it (`__Secure-authjs.session-token`).
    init(secrets: [String], salt: String) {
        keys = secrets.map { Self.key(secret: $0, salt: salt) }
    }

    /// jwt.ts's `getDerivedEncryptionKey` for A256CBC-HS512 and `calculateJwkThumbprint`'s key id:
    /// RFC 7638 over `{"k":…,"kty":"oct"}`, with SHA-512 for a 512-bit key.
    static func key(secret: String, salt: String) -> Key {
        let derived = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(secret.utf8)), salt: Data(salt.utf8),
            info: Data("Auth.js Generated Encryption Key (\(salt))".utf8), outputByteCount: 64)
        let bytes = derived.withUnsafeBytes { Array($0) }
        let jwk = #"{"k":""# + Base64URL.encode(bytes) + #"","kty":"oct"}"#
        return Key(
            id: Base64URL.encode(SHA512.hash(data: Data(jwk.utf8))),
            mac: SymmetricKey(data: Array(bytes[0..<32])), encryption: SymmetricKey(data: Array(bytes[32..<64])))
    }

    /// The claims of `token`, once its key, tag and `exp` (with `leeway`) are right at `now`.
    func claims(of token: String, now: Date) throws -> AuthJSClaims {
        let payload = try plaintext(of: token)
        let claims: AuthJSClaims
        do {
            claims = try JSONDecoder().decode(AuthJSClaims.self, from: payload)
        } catch {
            throw InvalidWebSessionToken(reason: "claims")
        }
        // jose's rule: expired once `exp` is at or before now less the tolerance.
        guard claims.exp > now.timeIntervalSince1970 - Self.leeway else { throw InvalidWebSessionToken(reason: "expired") }
        return claims
    }

    /// The decrypted payload of `token`, after its header, key and tag were checked; its claims
    /// are not looked at.
    func plaintext(of token: String) throws -> Data {
        guard token.utf8.count <= Self.maximumLength else { throw InvalidWebSessionToken(reason: "length") }
        // BASE64URL(header) . BASE64URL(encrypted key) . BASE64URL(IV) . BASE64URL(ciphertext) . BASE64URL(tag)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 5 else { throw InvalidWebSessionToken(reason: "parts") }
        // With `dir` the key is the derived one: there is no encrypted key.
        guard parts[1].isEmpty else { throw InvalidWebSessionToken(reason: "encrypted key") }
        guard let header = Self.decode(parts[0]), let iv = Self.decode(parts[2]), let ciphertext = Self.decode(parts[3]),
            let tag = Self.decode(parts[4])
        else { throw InvalidWebSessionToken(reason: "base64") }

        let key = try self.key(forHeader: header)
        guard iv.count == 16 else { throw InvalidWebSessionToken(reason: "iv") }
        guard tag.count == 32, !ciphertext.isEmpty, ciphertext.count % 16 == 0 else { throw InvalidWebSessionToken(reason: "tag") }

        // RFC 7518 §5.2.2.2: the tag is the first half of HMAC-SHA-512 over AAD ‖ IV ‖ ciphertext ‖
        // AL, AAD being the ASCII of the header's base64url and AL its length in bits, 64-bit big-endian.
        let aad = Array(parts[0].utf8)
        let bits = UInt64(aad.count) * 8
        let al = (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) }
        var mac = HMAC<SHA512>(key: key.mac)
        mac.update(data: aad)
        mac.update(data: iv)
        mac.update(data: ciphertext)
        mac.update(data: al)
        guard Self.matches(mac.finalize(), tag) else { throw InvalidWebSessionToken(reason: "tag") }

        do {
            return try AES._CBC.decrypt(ciphertext, using: key.encryption, iv: AES._CBC.IV(ivBytes: iv))
        } catch {
            // Only the holder of the key can make a token whose tag is right: this is no oracle.
            throw InvalidWebSessionToken(reason: "padding")
        }
    }

    /// The key the protected header names, once it says `dir` and A256CBC-HS512 and nothing this
    /// reader would have to understand.
    private func key(forHeader header: [UInt8]) throws -> Key {
        var algorithm: String?, encryption: String?, keyID: String?
        let wellFormed = header.withUnsafeBufferPointer { bytes in
            FlatJSONReader.read(bytes) { name, value in
                switch name {
                case "alg":
                    guard algorithm == nil, case .string(let text) = value else { return false }
                    algorithm = text
                case "enc":
                    guard encryption == nil, case .string(let text) = value else { return false }
                    encryption = text
                case "kid":
                    guard keyID == nil, case .string(let text) = value else { return false }
                    keyID = text
                // A critical extension or compression jose would refuse as well; Auth.js writes neither.
                case "crit", "zip":
                    return false
                default:
                    break
                }
                return true
            }
        }
        guard wellFormed else { throw InvalidWebSessionToken(reason: "header") }
        guard algorithm == "dir" else { throw InvalidWebSessionToken(reason: "alg") }
        guard encryption == "A256CBC-HS512" else { throw InvalidWebSessionToken(reason: "enc") }
        if let keyID {
            guard let key = keys.first(where: { $0.id == keyID }) else { throw InvalidWebSessionToken(reason: "kid") }
            return key
        }
        guard let first = keys.first else { throw InvalidWebSessionToken(reason: "no key") }
        return first
    }

    /// Strict unpadded base64url (nothing outside the alphabet, no `=`).
    private static func decode(_ segment: Substring) -> [UInt8]? {
        guard segment.utf8.allSatisfy(Base64URL.isAlphabet) else { return nil }
        return Base64URL.decode(String(segment))
    }

    /// Whether `tag` is the first `tag.count` bytes of `mac`, in time independent of where they differ.
    private static func matches(_ mac: HashedAuthenticationCode<SHA512>, _ tag: [UInt8]) -> Bool {
        mac.withUnsafeBytes { (expected: UnsafeRawBufferPointer) -> Bool in
            guard expected.count >= tag.count else { return false }
            var difference: UInt8 = 0
            for index in 0..<tag.count { difference |= expected[index] ^ tag[index] }
            return difference == 0
        }
    }
}
