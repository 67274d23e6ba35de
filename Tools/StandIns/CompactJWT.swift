import BFFWire
import Foundation
import NIOCore

/// A compact JWT as the push stand-ins read one: header and claims as JSON objects, the signing
/// input and the signature. Nil when it is not three base64url parts of which the first two are objects.
struct CompactJWT {
    let header: [String: Any]
    let claims: [String: Any]
    let signingInput: Data
    let signature: Data

    init?(_ token: some StringProtocol) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])), let claimBytes = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any]
        else { return nil }
        self.header = header
        self.claims = claims
        self.signingInput = Data("\(parts[0]).\(parts[1])".utf8)
        self.signature = Data(signature)
    }

    /// A NumericDate claim as RFC 7519 §2 and both push services want it: a JSON integer, not a
    /// string, a fraction, an exponent or a boolean.
    func numericDate(_ name: String) -> Int64? {
        Self.integer(claims[name])
    }

    /// `value` when JSONSerialization read it from an integer literal that fits 64 bits.
    static func integer(_ value: Any?) -> Int64? {
        guard let number = value as? NSNumber, !(value is Bool), String(cString: number.objCType) == "q" else { return nil }
        return number.int64Value
    }
}

/// A media type's essence, lower-cased and without parameters: `application/json; charset=utf-8` is `application/json`.
func mediaType(_ contentType: String?) -> String? {
    contentType.map { $0.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? "" }
}

/// `text` as a JSON string literal, quotes included.
func jsonString(_ text: String) -> String {
    var writer = JSONWriter(capacity: text.utf8.count + 2)
    writer.string(text)
    return String(buffer: writer.buffer)
}
