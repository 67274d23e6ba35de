import BFFWire
import Foundation
import OpenAPIRuntime

/// The contract's date-times (`RFC3339`), with the contract's errors: a client's malformed date is
/// a 422 naming it; a date without an RFC 3339 form cannot be written.
package struct RFC3339Dates: DateTranscoder {
    package init() {}

    /// A client's `date` for `field` in microseconds: 422 naming the field outside years 0001–9999,
    /// which a date read with an offset can cross in UTC.
    package static func micros(_ date: Date, field: String) throws -> Int64 {
        guard let micros = RFC3339.micros(date) else { throw APIError.validation(field, .yearOutOfRange) }
        return micros
    }

    package func encode(_ date: Date) throws -> String {
        guard let text = RFC3339.string(date) else {
            // The seconds, not the Date: describing a Date this far out traps in Foundation.
            throw EncodingError.invalidValue(
                date.timeIntervalSince1970, .init(codingPath: [], debugDescription: "only years 0001-9999 have an RFC 3339 form"))
        }
        return text
    }

    package func decode(_ text: String) throws -> Date {
        guard let date = RFC3339.date(text) else {
            throw APIError.validation("date-time", .notRFC3339(String(text.prefix(40))))
        }
        return date
    }
}
