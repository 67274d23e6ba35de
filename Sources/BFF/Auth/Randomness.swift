import BFFPlatform
import BFFWire
import Crypto
import Foundation

/// Secrets for the login flow and refresh tokens: CSPRNG bytes, base64url without padding.
enum SecureRandom {
    /// 256 random bits as 43 base64url characters.
    static func token() -> String {
        let key = SymmetricKey(size: .bits256)
        return key.withUnsafeBytes { Base64URL.encode($0) }
    }
}

enum Digest {
    /// As `Data`, which binds as `bytea` (a `[UInt8]` would bind as a `"char"[]` array).
    static func sha256(_ text: String) -> Data {
        Data(SHA256.hash(data: Data(text.utf8)))
    }
}
