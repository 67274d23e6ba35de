import BFFPlatform
import BFFWire
import Foundation

/// `BFF_JWT_KEYS`: `kid:base64url-secret` entries; the first signs, every one verifies, so keys
/// rotate by prepending a new entry and dropping the old one once its tokens have expired.
public struct JWTKeyRing: Sendable {
    public struct Key: Sendable {
        public let id: String
        public let secret: [UInt8]
    }

    public let keys: [Key]
    public var signingKey: Key { keys[0] }

    public init(parsing text: String, variable: String = "BFF_JWT_KEYS") throws {
        var keys: [Key] = []
        for (index, entry) in text.split(separator: ",").enumerated() {
            let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: ":", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ConfigurationError(variable, "entries must look like kid:base64url-secret")
            }
            // Not the key id: written the wrong way round, the entry's first part is the secret.
            guard let secret = Base64URL.decode(String(parts[1])), secret.count >= 32 else {
                throw ConfigurationError(variable, "entry \(index + 1) must be kid:secret with a secret of at least 32 bytes in base64url")
            }
            guard !keys.contains(where: { $0.id == parts[0] }) else {
                throw ConfigurationError(variable, "key id \(parts[0]) appears twice")
            }
            keys.append(Key(id: String(parts[0]), secret: secret))
        }
        guard !keys.isEmpty else { throw ConfigurationError(variable, "must name at least one key") }
        self.keys = keys
    }
}
