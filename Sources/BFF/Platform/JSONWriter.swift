/// Writes JSON straight into bytes, for the documents on hot paths (the AppJWT, the chat list) where
/// `JSONEncoder`'s generic machinery costs more than the rest of the request. The caller writes the
/// structure; this type gets strings, numbers and separators right.
struct JSONWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func byte(_ byte: UInt8) {
        bytes.append(byte)
    }

    /// `"key":`, for keys that are literals and need no escaping.
    mutating func key(_ key: StaticString) {
        bytes.append(UInt8(ascii: "\""))
        raw(key)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in string(utf8) }
    }

    mutating func string(_ value: String?) {
        if let value { string(value) } else { raw("null") }
    }

    /// RFC 8259 §7: quotation mark, reverse solidus and control characters escaped, the rest as is.
    mutating func string(_ utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var start = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
            start = index + 1
            bytes.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
            case 0x0A: bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "f"))
            default:
                raw("u00")
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0xF)])
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func integer<Integer: BinaryInteger>(_ value: Integer) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { digits in
            repeat {
                let (quotient, remainder) = magnitude.quotientAndRemainder(dividingBy: 10)
                digits[19 - count] = UInt8(ascii: "0") + UInt8(remainder)
                magnitude = quotient
                count += 1
            } while magnitude != 0
            bytes.append(contentsOf: digits[(20 - count)...])
        }
    }

    /// A lower-case RFC 4122 UUID string.
    mutating func uuid(_ uuid: UUIDBytes) {
        bytes.append(UInt8(ascii: "\""))
        withUnsafeBytes(of: uuid) { raw in
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                bytes.append(Self.hexDigits[Int(raw[index] >> 4)])
                bytes.append(Self.hexDigits[Int(raw[index] & 0xF)])
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// RFC 3339 in UTC with exactly milliseconds (`2026-11-22T09:15:00.123Z`), from microseconds
    /// since 1970, rounded to the nearest millisecond; the contract's timestamp form.
    mutating func timestamp(micros: Int64) {
        let millis = micros >= 0 ? (micros + 500) / 1000 : -((-micros + 499) / 1000)
        let (seconds, milli) = Self.floorDivide(millis, 1000)
        let (days, secondOfDay) = Self.floorDivide(seconds, 86_400)
        let (year, month, day) = Self.civil(fromDays: days)
        bytes.append(UInt8(ascii: "\""))
        fixed(year, width: 4)
        bytes.append(UInt8(ascii: "-"))
        fixed(month, width: 2)
        bytes.append(UInt8(ascii: "-"))
        fixed(day, width: 2)
        bytes.append(UInt8(ascii: "T"))
        fixed(secondOfDay / 3600, width: 2)
        bytes.append(UInt8(ascii: ":"))
        fixed(secondOfDay / 60 % 60, width: 2)
        bytes.append(UInt8(ascii: ":"))
        fixed(secondOfDay % 60, width: 2)
        bytes.append(UInt8(ascii: "."))
        fixed(milli, width: 3)
        bytes.append(UInt8(ascii: "Z"))
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func fixed(_ value: Int64, width: Int) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
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

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

/// The sixteen bytes of a UUID, as Foundation's `UUID.uuid` gives them.
typealias UUIDBytes = (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)
