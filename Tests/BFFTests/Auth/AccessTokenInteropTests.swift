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

@Suite("AppJWT interoperability", .timeLimit(.minutes(3)))
struct AccessTokenInteropTests {
    static let secret = [UInt8](repeating: 5, count: 32)

    @Test("tokens this server signs verify with jwt-kit, and jwt-kit's HS256 tokens verify here")
    func jwtKit() async throws {
        let tokens = AccessTokens(keyRing: try JWTKeyRing(parsing: "k5:" + Base64URL.encode(Self.secret)), issuer: "bff", audience: "mobile", lifetime: .seconds(900))
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Self.secret), digestAlgorithm: .sha256, kid: "k5")
        let user = UUID(), family = UUID()
        let ours = tokens.issue(
            userID: user, deviceID: "device-0001", familyID: family, scopes: ["chat:rw", "profile:read"],
            tokenID: "jti-1", issuedAt: Date())
        let claims = try await keys.verify(ours, as: InteropClaims.self)
        #expect(claims.sub.value == user.uuidString.lowercased() && claims.sid == family.uuidString.lowercased())
        #expect(claims.scope == "chat:rw profile:read" && claims.did == "device-0001" && claims.aud.value == ["mobile"])
        #expect(claims.exp.value.timeIntervalSince(claims.iat.value) == 900)

        let now = Date()
        let theirs = try await keys.sign(
            InteropClaims(
                iss: "bff", aud: "mobile", sub: .init(value: user.uuidString.lowercased()), iat: .init(value: now),
                exp: .init(value: now.addingTimeInterval(60)), jti: "jti-2", scope: "chat:rw", did: "device-0002",
                sid: family.uuidString.lowercased()), kid: "k5")
        let principal = try tokens.verify(theirs)
        #expect(principal.userID == user && principal.familyID == family && principal.deviceID == "device-0002")
        #expect(principal.scopes == ["chat:rw"] && principal.tokenID == "jti-2")
    }
}

struct InteropClaims: JWTPayload {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var sub: SubjectClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var jti: IDClaim
    var scope: String
    var did: String
    var sid: String

    func verify(using algorithm: some JWTAlgorithm) throws {}
}
