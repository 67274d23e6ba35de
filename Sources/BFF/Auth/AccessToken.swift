import Foundation
import JWTKit

/// The AppJWT's claims (DESIGN §4): `iss, aud, sub` (user id), `iat, exp, jti, scope`, `did` (device),
/// `sid` (refresh family). Every claim is required; decoding fails on a missing one.
struct AccessTokenClaims: JWTPayload, Equatable {
    var iss: IssuerClaim
    var aud: AudienceClaim
    var sub: SubjectClaim
    var iat: IssuedAtClaim
    var exp: ExpirationClaim
    var jti: IDClaim
    var scope: String
    var did: String
    var sid: String

    /// Signature checks happen in jwt-kit; the claim checks that need configuration happen in `AccessTokens`.
    func verify(using algorithm: some JWTAlgorithm) throws {}
}

/// Who a valid AppJWT speaks for.
public struct Principal: Sendable, Equatable {
    public let userID: UUID
    public let deviceID: String
    public let familyID: UUID
    public let scopes: Set<String>
    public let tokenID: String
}

/// A token that failed verification; the reason is for logs, never for the client.
struct InvalidAccessToken: Error, CustomStringConvertible {
    let reason: String
    var description: String { "invalid access token: \(reason)" }
}

/// Issues and verifies AppJWTs: HS256 only, signed with the ring's first key under its `kid`,
/// verified with whichever key the `kid` names. Verification needs no database.
public struct AccessTokens: Sendable {
    public static let allScopes = ["profile:read", "chat:rw", "push:register", "iap:verify"]

    private let keys: JWTKeyCollection
    private let keyIDs: Set<String>
    private let signingKeyID: String
    let issuer: String
    let audience: String
    let lifetime: Int
    /// Tolerated clock skew for `iat`.
    static let leeway: TimeInterval = 60

    public init(keyRing: JWTKeyRing, issuer: String, audience: String, lifetime: Int) async {
        // Sorted keys make a token a pure function of its claims, so a retried refresh can be
        // answered with byte-identical tokens.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        let serializer = DefaultJWTSerializer(jsonEncoder: encoder)
        let collection = JWTKeyCollection(defaultJWTSerializer: serializer)
        for key in keyRing.keys {
            await collection.add(
                hmac: HMACKey(from: key.secret), digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.id), serializer: serializer)
        }
        keys = collection
        keyIDs = Set(keyRing.keys.map(\.id))
        signingKeyID = keyRing.signingKey.id
        self.issuer = issuer
        self.audience = audience
        self.lifetime = lifetime
    }

    /// Signs a token issued at `issuedAt`; the same inputs always give the same token.
    public func issue(userID: UUID, deviceID: String, familyID: UUID, scopes: [String], tokenID: String, issuedAt: Date) async throws -> String {
        let issued = Date(timeIntervalSince1970: issuedAt.timeIntervalSince1970.rounded(.down))
        let claims = AccessTokenClaims(
            iss: .init(value: issuer), aud: .init(value: [audience]), sub: .init(value: userID.uuidString.lowercased()),
            iat: .init(value: issued), exp: .init(value: issued.addingTimeInterval(TimeInterval(lifetime))),
            jti: .init(value: tokenID), scope: scopes.joined(separator: " "), did: deviceID,
            sid: familyID.uuidString.lowercased())
        return try await keys.sign(claims, kid: JWKIdentifier(string: signingKeyID))
    }

    /// Verifies signature, algorithm, key id and every claim; throws `InvalidAccessToken`.
    public func verify(_ token: String, now: Date = Date()) async throws -> Principal {
        guard token.utf8.count <= 8192, let header = JOSEHeader(token: token) else { throw InvalidAccessToken(reason: "malformed") }
        guard header.alg == "HS256" else { throw InvalidAccessToken(reason: "algorithm \(header.alg ?? "missing")") }
        guard let kid = header.kid, keyIDs.contains(kid) else { throw InvalidAccessToken(reason: "unknown key id") }
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token, as: AccessTokenClaims.self)
        } catch {
            throw InvalidAccessToken(reason: "signature or format: \(error)")
        }
        guard claims.exp.value > now else { throw InvalidAccessToken(reason: "expired") }
        guard claims.iat.value <= now.addingTimeInterval(Self.leeway) else { throw InvalidAccessToken(reason: "issued in the future") }
        guard claims.iss.value == issuer else { throw InvalidAccessToken(reason: "issuer") }
        guard claims.aud.value.contains(audience) else { throw InvalidAccessToken(reason: "audience") }
        guard let userID = UUID(uuidString: claims.sub.value), let familyID = UUID(uuidString: claims.sid),
              !claims.did.isEmpty, !claims.jti.value.isEmpty
        else { throw InvalidAccessToken(reason: "malformed claims") }
        return Principal(
            userID: userID, deviceID: claims.did, familyID: familyID,
            scopes: Set(claims.scope.split(separator: " ").map(String.init)), tokenID: claims.jti.value)
    }
}
