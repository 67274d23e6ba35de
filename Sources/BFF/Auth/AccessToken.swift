import BFFPlatform
import BFFWire
import Crypto
import Foundation

/// Who a request's valid credentials speak for: an AppJWT, or the web's session cookie.
public struct Principal: Sendable, Equatable {
    /// What the credentials belong to.
    public enum Session: Sendable, Equatable {
        /// An app's sign-in: an AppJWT of a refresh family (`sid`) on one device (`did`).
        case app(deviceID: String, familyID: UUID)
        /// The web's Auth.js session cookie (docs/web-session.md): no device and no refresh family
        /// here. `authTime` is the IdP's `auth_time` the web copied into it at sign-in, if any.
        case web(authTime: Date?)
    }

    public let userID: UUID
    public let session: Session
    /// The `scope` claim: space-separated scope names.
    public let scope: String
    public let tokenID: String

    /// The app's device; nil for the web, which has none.
    public var deviceID: String? {
        guard case .app(let deviceID, _) = session else { return nil }
        return deviceID
    }

    /// The app session's refresh family; nil for the web, which has none.
    public var familyID: UUID? {
        guard case .app(_, let familyID) = session else { return nil }
        return familyID
    }

    public var scopes: Set<String> { Set(scope.split(separator: " ").map(String.init)) }

    /// Whether the token grants `name`, without splitting the claim (this runs on every request).
    public func has(scope name: String) -> Bool {
        var rest = Substring(scope)
        while !rest.isEmpty {
            let end = rest.firstIndex(of: " ") ?? rest.endIndex
            if rest[..<end] == name { return true }
            rest = end == rest.endIndex ? "" : rest[rest.index(after: end)...]
        }
        return false
    }

    /// Whether the token grants every scope there is, as every token the apps sign in for does
    /// (`AccessTokens.allScopes` in that order; a narrower or reordered claim is simply false).
    var hasEveryScope: Bool { scope == AccessTokens.everyScope }
}

/// A token that failed verification; the reason is for logs, never for the client.
struct InvalidAccessToken: Error, CustomStringConvertible {
    let reason: String
    var description: String { "invalid access token: \(reason)" }
}

/// Issues and verifies AppJWTs (docs/architecture.md#the-security-model): HS256 only, signed with the ring's first key under its
/// `kid`, verified with whichever key the `kid` names. Claims `iss, aud, sub` (user id),
/// `iat, exp, jti, scope`, `did` (device), `sid` (refresh family), every one required.
///
/// Verification runs on every authenticated request, so it works on the token's bytes: the header
/// is read and its `alg` and `kid` checked before any key is used, the MAC is compared in constant
/// time before the claims are read, and nothing goes through `JSONDecoder` or an actor.
public struct AccessTokens: Sendable {
    public static let allScopes = ["profile:read", "chat:rw", "push:register", "iap:verify"]
    /// The `scope` claim of a token issued with `allScopes`.
    static let everyScope = allScopes.joined(separator: " ")

    /// One HMAC per key id, already keyed: a copy continues from the keyed state, which saves
    /// hashing the key pads on every request.
    private let keys: [String: HMAC<SHA256>]
    private let signingKey: HMAC<SHA256>
    /// The encoded header of the tokens this process signs.
    private let signingHeader: [UInt8]
    let issuer: String
    let audience: String
    /// Whole seconds, as the `exp` claim counts them.
    let lifetime: Int
    /// Tolerated clock skew for `iat`.
    static let leeway: TimeInterval = 60
    /// Longer input is refused before any work.
    static let maximumLength = 8192

    public init(keyRing: JWTKeyRing, issuer: String, audience: String, lifetime: Duration) {
        keys = Dictionary(uniqueKeysWithValues: keyRing.keys.map { ($0.id, HMAC<SHA256>(key: SymmetricKey(data: $0.secret))) })
        signingKey = HMAC<SHA256>(key: SymmetricKey(data: keyRing.signingKey.secret))
        var header = JSONWriter(capacity: 64)
        header.raw("{")
        header.key("alg")
        header.string("HS256")
        header.raw(",")
        header.key("kid")
        header.string(keyRing.signingKey.id)
        header.raw(",")
        header.key("typ")
        header.string("JWT")
        header.raw("}")
        var encoded: [UInt8] = []
        Base64URL.append(header.buffer.readableBytesView, to: &encoded)
        signingHeader = encoded
        self.issuer = issuer
        self.audience = audience
        self.lifetime = Int(lifetime.components.seconds)
    }

    /// Signs a token issued at `issuedAt` (whole seconds). The claims are written in sorted key
    /// order, so the same inputs always give the byte-identical token a retried refresh needs.
    public func issue(userID: UUID, deviceID: String, familyID: UUID, scopes: [String], tokenID: String, issuedAt: Date) -> String {
        let issued = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        var claims = JSONWriter(capacity: 320)
        claims.raw("{")
        claims.key("aud")
        claims.string(audience)
        claims.raw(",")
        claims.key("did")
        claims.string(deviceID)
        claims.raw(",")
        claims.key("exp")
        claims.integer(issued + Int64(lifetime))
        claims.raw(",")
        claims.key("iat")
        claims.integer(issued)
        claims.raw(",")
        claims.key("iss")
        claims.string(issuer)
        claims.raw(",")
        claims.key("jti")
        claims.string(tokenID)
        claims.raw(",")
        claims.key("scope")
        claims.string(scopes.joined(separator: " "))
        claims.raw(",")
        claims.key("sid")
        claims.uuid(familyID.uuid)
        claims.raw(",")
        claims.key("sub")
        claims.uuid(userID.uuid)
        claims.raw("}")

        let claimBytes = claims.buffer.readableBytesView
        var token = signingHeader
        token.reserveCapacity(signingHeader.count + Base64URL.encodedCount(claimBytes.count) + 45)
        token.append(UInt8(ascii: "."))
        Base64URL.append(claimBytes, to: &token)
        var mac = signingKey
        token.withUnsafeBytes { mac.update(data: $0) }
        let code = mac.finalize()
        token.append(UInt8(ascii: "."))
        Base64URL.append(code, to: &token)
        return String(decoding: token, as: UTF8.self)
    }

    /// Verifies format, algorithm, key id, signature and every claim; throws `InvalidAccessToken`.
    public func verify(_ token: String, now: Date = Date()) throws -> Principal {
        var token = token
        return try token.withUTF8 { try verify(bytes: $0, now: now) }
    }

    private func verify(bytes token: UnsafeBufferPointer<UInt8>, now: Date) throws -> Principal {
        guard token.count <= Self.maximumLength,
            let firstDot = token.firstIndex(of: UInt8(ascii: ".")),
            let secondDot = token[(firstDot + 1)...].firstIndex(of: UInt8(ascii: ".")),
            !token[(secondDot + 1)...].contains(UInt8(ascii: "."))
        else { throw InvalidAccessToken(reason: "malformed") }

        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: token.count * 3 / 4) { scratch in
            let headerEncoded = UnsafeBufferPointer(rebasing: token[..<firstDot])
            guard let headerCount = Base64URL.decode(headerEncoded, into: scratch) else { throw InvalidAccessToken(reason: "malformed header") }
            var mac = try key(forHeader: UnsafeBufferPointer(rebasing: scratch[..<headerCount]))

            mac.update(data: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: token[..<secondDot])))
            let expected = mac.finalize()
            let signature = UnsafeBufferPointer(rebasing: token[(secondDot + 1)...])
            guard signature.count == 43, Base64URL.decode(signature, into: scratch) == SHA256.byteCount,
                // swift-crypto's comparison: constant time, whatever the first difference.
                expected == UnsafeBufferPointer(rebasing: scratch[..<SHA256.byteCount])
            else { throw InvalidAccessToken(reason: "signature") }

            let claimsEncoded = UnsafeBufferPointer(rebasing: token[(firstDot + 1)..<secondDot])
            guard let claimsCount = Base64URL.decode(claimsEncoded, into: scratch) else { throw InvalidAccessToken(reason: "malformed claims") }
            var claims = Claims()
            guard FlatJSONReader.read(UnsafeBufferPointer(rebasing: scratch[..<claimsCount]), { claims.take($0, $1) }) else {
                throw InvalidAccessToken(reason: "malformed claims")
            }
            return try claims.principal(issuer: issuer, audience: audience, lifetime: lifetime, now: now.timeIntervalSince1970)
        }
    }

    /// The key the header names, once it says HS256 and nothing this verifier does not understand.
    private func key(forHeader header: UnsafeBufferPointer<UInt8>) throws -> HMAC<SHA256> {
        var algorithm: String?, keyID: String?, understood = true
        var typed = false
        let wellFormed = FlatJSONReader.read(header) { name, value in
            switch (name, value) {
            case ("alg", .string(let text)) where algorithm == nil: algorithm = text
            case ("kid", .string(let text)) where keyID == nil: keyID = text
            case ("typ", .string("JWT")) where !typed: typed = true
            default: understood = false
            }
            return understood
        }
        guard wellFormed, understood else { throw InvalidAccessToken(reason: "header") }
        guard algorithm == "HS256" else { throw InvalidAccessToken(reason: "algorithm \(algorithm ?? "missing")") }
        guard let keyID, let key = keys[keyID] else { throw InvalidAccessToken(reason: "unknown key id") }
        return key
    }

    /// The claims as read; unknown members are ignored, wrongly typed ones fail the token.
    private struct Claims {
        var iss: String?, aud: [String]?, sub: String?, iat: Double?, exp: Double?
        var jti: String?, scope: String?, did: String?, sid: String?

        /// False for a claim of the wrong type or one seen before. One switch on the name, then
        /// the value: a tuple pattern per case would compare the name again for every case.
        mutating func take(_ name: String, _ value: FlatJSONReader.Value) -> Bool {
            switch name {
            case "iss": return Self.set(&iss, value)
            case "sub": return Self.set(&sub, value)
            case "jti": return Self.set(&jti, value)
            case "scope": return Self.set(&scope, value)
            case "did": return Self.set(&did, value)
            case "sid": return Self.set(&sid, value)
            case "iat": return Self.set(&iat, value)
            case "exp": return Self.set(&exp, value)
            case "aud":
                guard aud == nil else { return false }
                switch value {
                case .string(let text): aud = [text]
                case .strings(let texts): aud = texts
                default: return false
                }
                return true
            default:
                return true
            }
        }

        private static func set(_ claim: inout String?, _ value: FlatJSONReader.Value) -> Bool {
            guard claim == nil, case .string(let text) = value else { return false }
            claim = text
            return true
        }

        private static func set(_ claim: inout Double?, _ value: FlatJSONReader.Value) -> Bool {
            guard claim == nil, case .number(let number) = value else { return false }
            claim = number
            return true
        }

        /// A token lives no longer than this process's `lifetime` after its `iat`, whatever its `exp`
        /// says: one signed by a replica configured with a longer lifetime (during a rollout that
        /// shortens it) would otherwise outlive `RevokedSessions`' retention, which is sized on it.
        func principal(issuer: String, audience: String, lifetime: Int, now: Double) throws -> Principal {
            guard let iss, let aud, let sub, let iat, let exp, let jti, let scope, let did, let sid else {
                throw InvalidAccessToken(reason: "missing claims")
            }
            guard exp > now, iat + Double(lifetime) > now else { throw InvalidAccessToken(reason: "expired") }
            guard iat <= now + AccessTokens.leeway else { throw InvalidAccessToken(reason: "issued in the future") }
            guard iss == issuer else { throw InvalidAccessToken(reason: "issuer") }
            guard aud.contains(audience) else { throw InvalidAccessToken(reason: "audience") }
            guard let userID = UUID(canonical: sub), let familyID = UUID(canonical: sid), !did.isEmpty, !jti.isEmpty else {
                throw InvalidAccessToken(reason: "malformed claims")
            }
            return Principal(userID: userID, session: .app(deviceID: did, familyID: familyID), scope: scope, tokenID: jti)
        }
    }
}
