import Foundation
import OpenAPIRuntime

/// RFC 3339 dates for the contract: written in UTC with exactly milliseconds (the precision timestamps
/// are stored at, so a client echoing `updated_at` back compares exactly) and read with or without
/// fractional seconds.
struct RFC3339Dates: DateTranscoder {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let seconds = Date.ISO8601FormatStyle()

    func encode(_ date: Date) throws -> String {
        // Integer milliseconds, formatted by hand: a formatter truncates, so a stored .123 read back as
        // .12299999 would print .122.
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (whole, fraction) = millis.quotientAndRemainder(dividingBy: 1000)
        let (second, milli) = fraction < 0 ? (whole - 1, fraction + 1000) : (whole, fraction)
        let base = Date(timeIntervalSince1970: TimeInterval(second)).formatted(Self.seconds)
        return "\(base.dropLast())." + String(repeating: "0", count: 3 - String(milli).count) + "\(milli)Z"
    }

    func decode(_ text: String) throws -> Date {
        if let date = try? Self.withFraction.parse(text) { return date }
        if let date = try? Self.seconds.parse(text) { return date }
        throw APIError.validation("date-time", "\"\(text.prefix(40))\" is not an RFC 3339 date-time")
    }
}
