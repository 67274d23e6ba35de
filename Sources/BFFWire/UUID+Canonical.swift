import Foundation
import NIOCore

extension UUID {
    /// Parses the 36-character `8-4-4-4-12` hex form (either case) without Foundation's `sscanf`,
    /// which dominates a token check otherwise.
    public init?(canonical text: String) {
        var text = text
        guard let uuid = text.withUTF8({ Self.parse($0) }) else { return nil }
        self.init(uuid: uuid)
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> uuid_t? {
        guard utf8.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &bytes) { output -> Bool in
            var position = 0
            for index in 0..<16 {
                if position == 8 || position == 13 || position == 18 || position == 23 {
                    guard utf8[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = hexValue(utf8[position]), let low = hexValue(utf8[position + 1]) else { return false }
                output[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return ok ? bytes : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension UUID {
    /// A version 4 UUID from one call to the system generator (glibc's `arc4random_buf`, one
    /// `getrandom`). Foundation's `UUID()` opens and reads `/dev/urandom` on every call, and
    /// `SystemRandomNumberGenerator` makes one system call per 64-bit word.
    public static func random() -> UUID {
        var bytes = unsafeBitCast((UInt64(0), UInt64(0)), to: uuid_t.self)
        withUnsafeMutableBytes(of: &bytes) { raw in
            arc4random_buf(raw.baseAddress!, raw.count)
            raw[6] = raw[6] & 0x0F | 0x40
            raw[8] = raw[8] & 0x3F | 0x80
        }
        return UUID(uuid: bytes)
    }

    /// The lower-case `8-4-4-4-12` form, without going through `uuidString` and `lowercased()`.
    public var lowercasedString: String {
        var writer = JSONWriter(capacity: 38)
        writer.uuid(uuid)
        return String(decoding: writer.buffer.readableBytesView.dropFirst().dropLast(), as: UTF8.self)
    }
}
