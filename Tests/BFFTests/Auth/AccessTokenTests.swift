import BFFWire
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("AppJWT", .timeLimit(.minutes(3)))
struct AccessTokenTests {
    static let k1 = [UInt8](repeating: 9, count: 32)
    static let k2 = [UInt8](repeating: 7, count: 32)

    func tokens(_ ring: String = TestEnvironment.jwtKeys) throws -> AccessTokens {
        AccessTokens(keyRing: try JWTKeyRing(parsing: ring), issuer: "bff", audience: "mobile", lifetime: .seconds(900))
    }

    /// A token with any header and claims, HMAC-signed with `secret` (or unsigned).
    static func forge(header: [String: Any], claims: [String: Any], secret: [UInt8]? = k2) throws -> String {
        let h = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys))
        let c = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        guard let secret else { return "\(h).\(c)." }
        let mac = HMAC<SHA256>.authenticationCode(for: Data("\(h).\(c)".utf8), using: SymmetricKey(data: secret))
        return "\(h).\(c).\(Base64URL.encode(mac))"
    }

    static func validClaims(now: Date = Date()) -> [String: Any] {
        [
            "iss": "bff", "aud": "mobile", "sub": UUID().uuidString.lowercased(), "iat": Int(now.timeIntervalSince1970),
            "exp": Int(now.timeIntervalSince1970) + 900, "jti": "jti-1", "scope": "profile:read chat:rw",
            "did": "device-0001", "sid": UUID().uuidString.lowercased(),
        ]
    }

    @Test("a signed token verifies into its principal; tokens are a pure function of their claims")
    func roundTrip() async throws {
        let tokens = try tokens()
        let user = UUID(), family = UUID()
        let issuedAt = Date()
        let token = tokens.issue(
            userID: user, deviceID: "device-0001", familyID: family, scopes: ["chat:rw"], tokenID: "t1", issuedAt: issuedAt)
        let again = tokens.issue(
            userID: user, deviceID: "device-0001", familyID: family, scopes: ["chat:rw"], tokenID: "t1", issuedAt: issuedAt)
        #expect(token == again)
        let principal = try tokens.verify(token)
        #expect(principal.userID == user && principal.familyID == family && principal.deviceID == "device-0001")
        #expect(principal.scopes == ["chat:rw"])
        #expect(JOSEHeader(token: token)?.kid == "k2")
        #expect(JOSEHeader(token: token)?.alg == "HS256")
    }

    @Test("the second key of the ring still verifies (rotation by prepending a key)")
    func secondKeyVerifies() async throws {
        let old = try tokens("k1:" + Base64URL.encode(Self.k1))
        let token = old.issue(
            userID: UUID(), deviceID: "device-0001", familyID: UUID(), scopes: ["chat:rw"], tokenID: "t", issuedAt: Date())
        let rotated = try tokens()
        _ = try rotated.verify(token)
        let dropped = try tokens("k3:" + Base64URL.encode([UInt8](repeating: 3, count: 32)))
        #expect(throws: InvalidAccessToken.self) { try dropped.verify(token) }
    }

    @Test("a token signed with a longer lifetime (a replica before a rollout) lives only this lifetime after its iat")
    func lifetimeOfThisProcessBounds() async throws {
        let longer = AccessTokens(keyRing: try JWTKeyRing(parsing: TestEnvironment.jwtKeys), issuer: "bff", audience: "mobile", lifetime: .seconds(3600))
        let tokens = try tokens()
        let now = Date()
        let young = longer.issue(
            userID: UUID(), deviceID: "device-0001", familyID: UUID(), scopes: ["chat:rw"], tokenID: "t", issuedAt: now.addingTimeInterval(-890))
        let old = longer.issue(
            userID: UUID(), deviceID: "device-0001", familyID: UUID(), scopes: ["chat:rw"], tokenID: "t", issuedAt: now.addingTimeInterval(-910))
        _ = try tokens.verify(young, now: now)
        _ = try longer.verify(old, now: now)
        let refusal = #expect(throws: InvalidAccessToken.self) { try tokens.verify(old, now: now) }
        #expect(refusal?.reason == "expired")
    }

    @Test(
        "rejected: any algorithm but HS256, unknown kid, bad signature, expired, future iat, wrong iss or aud, missing claim, malformed",
        arguments: [
            "alg none", "alg HS512", "alg RS256", "no kid", "unknown kid", "bad signature", "expired", "iat in the future",
            "wrong iss", "wrong aud", "missing did", "missing exp", "not a uuid sub", "garbage", "two parts",
            "duplicate sub", "duplicate alg", "numeric scope", "crit header", "padded signature",
        ])
    func rejections(_ variant: String) async throws {
        let tokens = try tokens()
        var header: [String: Any] = ["alg": "HS256", "typ": "JWT", "kid": "k2"]
        var claims = Self.validClaims()
        var secret: [UInt8]? = Self.k2
        let now = Int(Date().timeIntervalSince1970)
        switch variant {
        case "alg none": header["alg"] = "none"; secret = nil
        case "alg HS512": header["alg"] = "HS512"
        case "alg RS256": header["alg"] = "RS256"
        case "no kid": header["kid"] = nil
        case "unknown kid": header["kid"] = "k9"
        case "bad signature": secret = [UInt8](repeating: 1, count: 32)
        case "expired": claims["iat"] = now - 1000; claims["exp"] = now - 100
        case "iat in the future": claims["iat"] = now + 120; claims["exp"] = now + 1000
        case "wrong iss": claims["iss"] = "someone-else"
        case "wrong aud": claims["aud"] = "web"
        case "missing did": claims["did"] = nil
        case "missing exp": claims["exp"] = nil
        case "not a uuid sub": claims["sub"] = "admin"
        default: break
        }
        var token = try Self.forge(header: header, claims: claims, secret: secret)
        if variant == "garbage" { token = "not-a-token" }
        if variant == "two parts" { token = token.split(separator: ".").prefix(2).joined(separator: ".") }
        if variant == "numeric scope" { claims["scope"] = 7; token = try Self.forge(header: header, claims: claims, secret: secret) }
        if variant == "crit header" { header["crit"] = ["exp"]; token = try Self.forge(header: header, claims: claims, secret: secret) }
        if variant == "padded signature" { token += "=" }
        if variant == "duplicate sub" || variant == "duplicate alg" {
            // JSONSerialization cannot write a member twice: these are assembled by hand, then signed.
            var headerJSON = #"{"alg":"HS256","kid":"k2","typ":"JWT"}"#
            var claimsJSON = String(decoding: try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys), as: UTF8.self)
            if variant == "duplicate sub" { claimsJSON = String(claimsJSON.dropLast()) + #","sub":"\#(UUID().uuidString.lowercased())"}"# }
            if variant == "duplicate alg" { headerJSON = #"{"alg":"none","alg":"HS256","kid":"k2","typ":"JWT"}"# }
            let signingInput = Base64URL.encode(Array(headerJSON.utf8)) + "." + Base64URL.encode(Array(claimsJSON.utf8))
            let mac = HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: Self.k2))
            token = signingInput + "." + Base64URL.encode(mac)
        }
        #expect(throws: InvalidAccessToken.self) { try tokens.verify(token) }
    }

    @Test("a control: the forged-token helper makes tokens that verify when nothing is bent")
    func forgedControl() async throws {
        let token = try Self.forge(header: ["alg": "HS256", "typ": "JWT", "kid": "k2"], claims: Self.validClaims())
        _ = try tokens().verify(token)
    }
}
