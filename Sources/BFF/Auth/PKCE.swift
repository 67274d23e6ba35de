import BFFPlatform
import BFFWire
import Crypto
import Foundation

/// Proof Key for Code Exchange (RFC 7636) as the server sees it: the app makes the verifier and
/// keeps it; the server stores the challenge from `/auth/start` and checks the verifier at the
/// callback, before the code is exchanged.
enum PKCE {
    /// S256 (§4.2): base64url(SHA-256(ASCII(verifier))).
    static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(data: Data(verifier.utf8)))
    }

    /// An S256 challenge: a SHA-256 digest in base64url, 43 characters.
    static func isChallenge(_ text: String) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy(Base64URL.isAlphabet)
    }

    /// A verifier (§4.1): 43–128 characters of `A-Z a-z 0-9 - . _ ~`.
    static func isVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count) && text.utf8.allSatisfy { Base64URL.isAlphabet($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }
    }

    /// Whether `verifier` is well formed and its S256 digest is `challenge`, compared in constant time
    /// (swift-crypto's digest comparison).
    static func verifier(_ verifier: String, matches challenge: String) -> Bool {
        guard isVerifier(verifier), let expected = Base64URL.decode(challenge), expected.count == SHA256.byteCount else { return false }
        return SHA256.hash(data: Data(verifier.utf8)) == expected
    }
}
