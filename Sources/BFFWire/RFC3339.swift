import Foundation

/// RFC 3339 date-times as the contract and PostgreSQL share them: the proleptic Gregorian calendar,
/// years 0001–9999, written in UTC with exactly milliseconds (the precision timestamps are stored at,
/// so a client echoing `updated_at` back compares exactly), read with or without fractional seconds
/// in any offset.
public enum RFC3339 {
    /// Microseconds of years 0001–9999, the dates RFC 3339 can write.
    public static let representableMicros: ClosedRange<Int64> = -62_135_596_800_000_000...253_402_300_799_999_999

    /// `date` in microseconds since 1970, to the nearest; nil outside years 0001–9999.
    public static func micros(_ date: Date) -> Int64? {
        Int64(exactly: (date.timeIntervalSince1970 * 1_000_000).rounded()).flatMap { representableMicros.contains($0) ? $0 : nil }
    }

    /// `date` written in UTC to the millisecond; nil outside years 0001–9999.
    public static func string(_ date: Date) -> String? {
        guard let micros = micros(date) else { return nil }
        // One writer for every timestamp of the contract: the JSON written on hot paths has the same bytes.
        var writer = JSONWriter(capacity: 32)
        writer.timestamp(micros: micros)
        return String(decoding: writer.buffer.readableBytesView.dropFirst().dropLast(), as: UTF8.self)
    }

    /// The date `text` names; nil when it is not an RFC 3339 date-time of years 0001–9999.
    public static func date(_ text: String) -> Date? {
        secondsSinceEpoch(Substring(text).utf8).map(Date.init(timeIntervalSince1970:))
    }

    /// RFC 3339 §5.6 `date-time`, exactly: each field its fixed width and range, a fraction of 1 to 9
    /// digits, `T` and `Z` in either case, nothing after the offset, and years 0001–9999 so that every
    /// date read converts to microseconds (Foundation's parser took `2025-01-01T00:00:00Zjunk` and
    /// `2025-02-30`). A leap second (`:60`) reads as the second after.
    public static func secondsSinceEpoch(_ text: Substring.UTF8View) -> Double? {
        var rest = text[...]
        func number(_ width: Int, _ range: ClosedRange<Int>) -> Int? {
            var value = 0
            for _ in 0..<width {
                guard let byte = rest.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                rest = rest.dropFirst()
            }
            return range.contains(value) ? value : nil
        }
        func skip(_ allowed: UInt8...) -> Bool {
            guard let byte = rest.first, allowed.contains(byte) else { return false }
            rest = rest.dropFirst()
            return true
        }
        guard let year = number(4, 1...9999), skip(UInt8(ascii: "-")), let month = number(2, 1...12), skip(UInt8(ascii: "-")),
            let day = number(2, 1...daysIn(month: month, year: year)), skip(UInt8(ascii: "T"), UInt8(ascii: "t")),
            let hour = number(2, 0...23), skip(UInt8(ascii: ":")), let minute = number(2, 0...59), skip(UInt8(ascii: ":")),
            let second = number(2, 0...60)
        else { return nil }
        var fraction = 0.0
        if skip(UInt8(ascii: ".")) {
            var digits = 0, scale = 1.0
            while let byte = rest.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                digits += 1
                scale /= 10
                fraction += Double(byte - UInt8(ascii: "0")) * scale
                rest = rest.dropFirst()
            }
            guard (1...9).contains(digits) else { return nil }
        }
        var offset = 0
        if skip(UInt8(ascii: "Z"), UInt8(ascii: "z")) {
            offset = 0
        } else if let sign = rest.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            rest = rest.dropFirst()
            guard let hours = number(2, 0...23), skip(UInt8(ascii: ":")), let minutes = number(2, 0...59) else { return nil }
            offset = (hours * 60 + minutes) * 60 * (sign == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        guard rest.isEmpty else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let whole = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
        return Double(whole) + fraction
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date of year 1 or later (H. Hinnant's
    /// `days_from_civil`: years counted from March, so that the leap day ends one).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
