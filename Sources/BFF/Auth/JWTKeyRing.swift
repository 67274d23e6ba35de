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
        for entry in text.split(separator: ",") {
            let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: ":", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ConfigurationError(variable, "entries must look like kid:base64url-secret")
            }
            guard let secret = Base64URL.decode(String(parts[1])), secret.count >= 32 else {
                throw ConfigurationError(variable, "key \(parts[0]) must be base64url of at least 32 bytes")
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

/// Base64url without padding (RFC 4648 §5), the alphabet of tokens and keys.
public enum Base64URL {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: String) -> [UInt8]? {
        guard text.utf8.allSatisfy({ byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F || byte == 0x3D
        }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 = base64.replacingOccurrences(of: "=", with: "")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }
}
