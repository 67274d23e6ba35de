import BFFPlatform
import Foundation
import JWTKit

/// A JWT NumericDate in whole seconds. jwt-kit's `Date` claims write fractions of a second, and
/// Google's token endpoint refuses an assertion whose `iat` or `exp` is not an integer.
struct WholeSeconds: Codable, Sendable, Equatable {
    let value: Int64

    init(_ date: Date) {
        value = Int64(date.timeIntervalSince1970.rounded(.down))
    }

    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Int64.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

/// An APNs provider token's claims (Apple, "Establishing a token-based connection to APNs").
struct APNsProviderClaims: JWTPayload {
    /// The team id.
    let iss: String
    let iat: WholeSeconds

    /// Only ever signed here, never verified.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A service account's JWT-bearer grant (RFC 7523; Google, "Using OAuth 2.0 for Server to Server Applications").
struct GoogleAssertionClaims: JWTPayload {
    /// The service account's email.
    let iss: String
    let scope: String
    /// The account's `token_uri`.
    let aud: String
    let iat: WholeSeconds
    let exp: WholeSeconds

    /// Only ever signed here, never verified.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
