import NIOCore

/// Writes JSON straight into bytes, for the documents on hot paths (the AppJWT, the chat list) where
/// `JSONEncoder`'s generic machinery costs more than the rest of the request. The caller writes the
/// structure; this type gets strings, numbers and separators right.
public struct JSONWriter {
    /// The document so far. A `ByteBuffer`, so a response body needs no copy; the fixed-width values
    /// (UUIDs, timestamps, integers) are written into it in one reservation each, not byte by byte.
    public private(set) var buffer: ByteBuffer

    public init(capacity: Int = 256) {
        buffer = ByteBufferAllocator().buffer(capacity: capacity)
    }

    public mutating func raw(_ text: StaticString) {
        buffer.writeStaticString(text)
    }

    public mutating func byte(_ byte: UInt8) {
        buffer.writeInteger(byte)
    }

    /// `"key":`, for keys that are literals and need no escaping.
    public mutating func key(_ key: StaticString) {
        byte(UInt8(ascii: "\""))
        raw(key)
        raw("\":")
    }

    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in string(utf8) }
    }

    public mutating func string(_ value: String?) {
        if let value { string(value) } else { raw("null") }
    }

    /// RFC 8259 §7: quotation mark, reverse solidus and control characters escaped, the rest as is.
    public mutating func string(_ utf8: UnsafeBufferPointer<UInt8>) {
        byte(UInt8(ascii: "\""))
        var start = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start..<index])))
            start = index + 1
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            default:
                fixedWidth(6) { out in
                    out[0] = UInt8(ascii: "\\"); out[1] = UInt8(ascii: "u"); out[2] = UInt8(ascii: "0"); out[3] = UInt8(ascii: "0")
                    out[4] = Self.hexDigit(byte >> 4)
                    out[5] = Self.hexDigit(byte & 0xF)
                }
            }
        }
        buffer.writeBytes(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start...])))
        byte(UInt8(ascii: "\""))
    }

    public mutating func integer(_ value: Int) {
        integer(Int64(value))
    }

    /// Not generic: called from another module, a generic one ran unspecialised, every digit
    /// through `FixedWidthInteger`'s witness table (perf on scripts/bench list).
    public mutating func integer(_ value: Int64) {
        // 20 digits hold any 64-bit magnitude, plus the sign.
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 21) { out in
            var count = 0
            if value < 0 {
                out[0] = UInt8(ascii: "-")
                count = 1
            }
            let firstDigit = count
            var magnitude = value.magnitude
            repeat {
                let (quotient, remainder) = magnitude.quotientAndRemainder(dividingBy: 10)
                out[count] = UInt8(ascii: "0") + UInt8(remainder)
                count += 1
                magnitude = quotient
            } while magnitude != 0
            // Written least significant first.
            var digits = UnsafeMutableRawBufferPointer(rebasing: out[firstDigit..<count])
            digits.reverse()
            return count
        }
    }

    /// A lower-case RFC 4122 UUID string.
    public mutating func uuid(_ uuid: UUIDBytes) {
        fixedWidth(38) { out in
            withUnsafeBytes(of: uuid) { raw in
                out[0] = UInt8(ascii: "\"")
                var position = 1
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = Self.hexDigit(raw[index] >> 4)
                    out[position + 1] = Self.hexDigit(raw[index] & 0xF)
                    position += 2
                }
                out[37] = UInt8(ascii: "\"")
            }
        }
    }

    /// RFC 3339 in UTC with exactly milliseconds (`2026-11-22T09:15:00.123Z`), from microseconds
    /// since 1970, rounded to the nearest millisecond; the contract's timestamp form.
    public mutating func timestamp(micros: Int64) {
        let millis = micros >= 0 ? (micros + 500) / 1000 : -((-micros + 499) / 1000)
        let (seconds, milli) = Self.floorDivide(millis, 1000)
        let (days, secondOfDay) = Self.floorDivide(seconds, 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        fixedWidth(26) { out in
            // Years outside 0…9999 have no RFC 3339 form; the service stores only its own clock's times.
            let year = Int(year)
            out[0] = UInt8(ascii: "\"")
            Self.twoDigits(year / 100 % 100, at: out + 1)
            Self.twoDigits(year % 100, at: out + 3)
            out[5] = UInt8(ascii: "-")
            Self.twoDigits(Int(month), at: out + 6)
            out[8] = UInt8(ascii: "-")
            Self.twoDigits(Int(day), at: out + 9)
            out[11] = UInt8(ascii: "T")
            let secondOfDay = Int(secondOfDay)
            Self.twoDigits(secondOfDay / 3600, at: out + 12)
            out[14] = UInt8(ascii: ":")
            Self.twoDigits(secondOfDay / 60 % 60, at: out + 15)
            out[17] = UInt8(ascii: ":")
            Self.twoDigits(secondOfDay % 60, at: out + 18)
            out[20] = UInt8(ascii: ".")
            let milli = Int(milli)
            out[21] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milli / 100)
            Self.twoDigits(milli % 100, at: out + 22)
            out[24] = UInt8(ascii: "Z")
            out[25] = UInt8(ascii: "\"")
        }
    }

    /// Reserves exactly `count` bytes and lets `body` fill all of them.
    private mutating func fixedWidth(_ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return count
        }
    }

    private static func twoDigits(_ value: Int, at out: UnsafeMutablePointer<UInt8>) {
        out[0] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value / 10)
        out[1] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    public static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

}

/// The sixteen bytes of a UUID, as Foundation's `UUID.uuid` gives them.
public typealias UUIDBytes = (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)
