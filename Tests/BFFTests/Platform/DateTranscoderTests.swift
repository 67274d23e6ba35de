import Foundation
import Testing

@testable import BFF
@testable import BFFPlatform

/// `RFC3339Dates` puts the contract's errors on `RFC3339` (BFFWire, whose tests hold the format
/// itself): what a client sends wrong is a 422, what cannot be written is an encoding error.
@Suite("RFC 3339 transcoder", .timeLimit(.minutes(3)))
struct DateTranscoderTests {
    @Test("a malformed client date is a validation error naming date-time; a date outside years 0001-9999 cannot be written")
    func errors() throws {
        let dates = RFC3339Dates()
        #expect(try dates.decode("2025-01-01t09:00:00+09:00") == Date(timeIntervalSince1970: 1_735_689_600))
        for text in ["", "2025-02-29T00:00:00Z", "2025-01-01T00:00:00Zjunk"] {
            let error = #expect(throws: APIError.self, "\(text)") { try dates.decode(text) }
            #expect(error?.code == .validationFailed, "\(text)")
        }
        for seconds in [-62_135_596_801.0, 253_402_300_800, .nan] {
            #expect(throws: EncodingError.self, "\(seconds)") { try dates.encode(Date(timeIntervalSince1970: seconds)) }
        }
        #expect(try dates.encode(Date(timeIntervalSince1970: 1_735_689_600.123_4)) == "2025-01-01T00:00:00.123Z")
        #expect(throws: APIError.self) { try RFC3339Dates.micros(Date(timeIntervalSince1970: -62_135_596_801), field: "updated_at") }
    }
}
