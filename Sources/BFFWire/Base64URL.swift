/// Base64url without padding (RFC 4648 §5), the alphabet of tokens, keys and cursors. Byte-level,
/// because it runs several times on every authenticated request.
public enum Base64URL {
    @usableFromInline static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 0...63 for an alphabet byte, 0xFF for anything else.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    // Inlinable, so each caller gets it specialised for its own byte sequence: called across the
    // module unspecialised, every byte went through the protocols' witness tables (a list request's
    // cursor cost more than its twenty UUIDs, perf on scripts/bench list).
    @inlinable
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        output.reserveCapacity(encodedCount(bytes.underestimatedCount))
        append(bytes, to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    @inlinable
    public static func encodedCount(_ byteCount: Int) -> Int { (byteCount * 4 + 2) / 3 }

    /// Appends the encoding of `bytes` to `output`.
    @inlinable
    public static func append<Bytes: Sequence, Output: RangeReplaceableCollection>(
        _ bytes: Bytes, to output: inout Output
    ) where Bytes.Element == UInt8, Output.Element == UInt8 {
        alphabet.withUnsafeBufferPointer { alphabet in
            var iterator = bytes.makeIterator()
            while let b0 = iterator.next() {
                let b1 = iterator.next(), b2 = iterator.next()
                let group = UInt32(b0) << 16 | UInt32(b1 ?? 0) << 8 | UInt32(b2 ?? 0)
                output.append(alphabet[Int(group >> 18 & 63)])
                output.append(alphabet[Int(group >> 12 & 63)])
                if b1 != nil { output.append(alphabet[Int(group >> 6 & 63)]) }
                if b2 != nil { output.append(alphabet[Int(group & 63)]) }
            }
        }
    }

    /// Whether `byte` is one of the 64 characters (not `=`).
    public static func isAlphabet(_ byte: UInt8) -> Bool { values[Int(byte)] & 0xC0 == 0 }

    /// Decodes unpadded base64url, or padded with trailing `=`; nil for anything else.
    public static func decode(_ text: String) -> [UInt8]? {
        var encoded = Array(text.utf8)
        let padding = encoded.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return nil }
        encoded.removeLast(padding)
        var output = [UInt8](repeating: 0, count: encoded.count * 3 / 4)
        let written = encoded.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { decode(input, into: $0) }
        }
        guard let written else { return nil }
        output.removeLast(output.count - written)
        return output
    }

    /// Strict unpadded base64url into `output`, which must hold `encoded.count * 3 / 4` bytes: the
    /// number of bytes written, or nil on any byte outside the alphabet, an impossible length, or
    /// unused bits that are not zero (so one byte string has exactly one encoding). No allocation:
    /// this runs on every request's token.
    public static func decode(_ encoded: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        precondition(output.count >= encoded.count * 3 / 4)
        return values.withUnsafeBufferPointer { values -> Int? in
            var written = 0
            var index = 0
            let whole = encoded.count & ~3
            while index < whole {
                let a = values[Int(encoded[index])], b = values[Int(encoded[index + 1])]
                let c = values[Int(encoded[index + 2])], d = values[Int(encoded[index + 3])]
                guard (a | b | c | d) & 0xC0 == 0 else { return nil }
                let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                output[written] = UInt8(truncatingIfNeeded: group >> 16)
                output[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                output[written + 2] = UInt8(truncatingIfNeeded: group)
                written += 3
                index += 4
            }
            switch encoded.count - whole {
            case 0:
                return written
            case 2:
                let a = values[Int(encoded[index])], b = values[Int(encoded[index + 1])]
                guard (a | b) & 0xC0 == 0, b & 0xF == 0 else { return nil }
                output[written] = a << 2 | b >> 4
                return written + 1
            case 3:
                let a = values[Int(encoded[index])], b = values[Int(encoded[index + 1])], c = values[Int(encoded[index + 2])]
                guard (a | b | c) & 0xC0 == 0, c & 0x3 == 0 else { return nil }
                output[written] = a << 2 | b >> 4
                output[written + 1] = b << 4 | c >> 2
                return written + 2
            default:
                return nil
            }
        }
    }
}
