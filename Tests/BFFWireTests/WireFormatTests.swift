import Foundation
import NIOCore
import Testing

@testable import BFFWire

/// The hand-written encoders and decoders of the hot paths, held to the standards they replace.
@Suite("Wire formats", .timeLimit(.minutes(3)))
struct WireFormatTests {
    @Test("base64url: RFC 4648 vectors both ways; padding only at the end; non-canonical and impossible input refused")
    func base64url() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("Zg==") == Array("f".utf8))
        for bad in ["Zh", "Zm9", "Z", "Zg===", "Z=g", "Zm9v+", "Zm9v/", "Zm 9v", "é"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
        }
        var generator = SystemRandomNumberGenerator()
        for count in 0..<70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let foundation = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == foundation)
            #expect(Base64URL.decode(foundation) == bytes)
        }
    }

    @Test("JSONWriter strings and integers read back through JSONSerialization unchanged")
    func writerRoundTrip() throws {
        let texts = ["plain", "quote \" backslash \\ slash /", "lines\n\r\t\u{8}\u{C}", "nul \u{0} and \u{1F}", "日本語 🧪", ""]
        for text in texts {
            var writer = JSONWriter()
            writer.raw("[")
            writer.string(text)
            writer.raw(",")
            writer.integer(Int64.min)
            writer.raw(",")
            writer.integer(0)
            writer.raw(",")
            writer.integer(Int64.max)
            writer.raw("]")
            let array = try #require(try JSONSerialization.jsonObject(with: Data(writer.buffer.readableBytesView)) as? [Any])
            #expect(array[0] as? String == text)
            #expect((array[1] as? NSNumber)?.int64Value == Int64.min)
            #expect((array[2] as? NSNumber)?.int64Value == 0)
            #expect((array[3] as? NSNumber)?.int64Value == Int64.max)
        }
        var writer = JSONWriter()
        writer.uuid(UUID(uuidString: "0A1B2C3D-4E5F-6789-ABCD-EF0123456789")!.uuid)
        #expect(String(buffer: writer.buffer) == "\"0a1b2c3d-4e5f-6789-abcd-ef0123456789\"")
    }

    @Test("JSONWriter timestamps, which RFC3339 writes too, equal Foundation's ISO 8601 across eras, rounded to the millisecond")
    func timestamps() throws {
        func written(_ micros: Int64) -> String {
            var writer = JSONWriter()
            writer.timestamp(micros: micros)
            return String(buffer: writer.buffer)
        }
        #expect(written(0) == "\"1970-01-01T00:00:00.000Z\"")
        #expect(written(499) == "\"1970-01-01T00:00:00.000Z\"")
        #expect(written(500) == "\"1970-01-01T00:00:00.001Z\"")
        #expect(written(-1) == "\"1970-01-01T00:00:00.000Z\"")
        #expect(written(-501) == "\"1969-12-31T23:59:59.999Z\"")
        #expect(written(951_782_400_000_000) == "\"2000-02-29T00:00:00.000Z\"")
        #expect(written(1_709_251_199_999_600) == "\"2024-03-01T00:00:00.000Z\"")
        var generator = SystemRandomNumberGenerator()
        // 1900-03-01 … 2099-12-31, leap days included. Foundation formats the whole seconds (its
        // fractions truncate a binary fraction: .123 can print .122), the milliseconds are appended.
        for _ in 0..<2_000 {
            let millis = Int64.random(in: -2_203_891_200_000...4_102_444_799_999, using: &generator)
            let (second, milli) = (millis - (millis % 1000 + 1000) % 1000, (millis % 1000 + 1000) % 1000)
            let whole = Date(timeIntervalSince1970: Double(second / 1000)).formatted(Date.ISO8601FormatStyle())
            let expected = "\(whole.dropLast()).\(String(String(1000 + milli).dropFirst()))Z"
            #expect(written(millis * 1000) == "\"\(expected)\"", "\(millis)")
            #expect(RFC3339.string(Date(timeIntervalSince1970: Double(millis) / 1000)) == expected, "\(millis)")
        }
    }

    @Test("RFC 3339 dates are read strictly: every field its width and range, years 0001-9999, nothing after the offset")
    func rfc3339Reading() throws {
        let accepted: [(String, Double)] = [
            ("2025-01-01T00:00:00Z", 1_735_689_600),
            ("2025-01-01t09:00:00+09:00", 1_735_689_600),
            ("2024-12-31T14:30:00-09:30", 1_735_689_600),
            ("2025-01-01T00:00:00z", 1_735_689_600),
            ("2025-01-01T00:00:00.5Z", 1_735_689_600.5),
            ("2025-01-01T00:00:00.123456Z", 1_735_689_600.123456),
            ("2024-02-29T00:00:00Z", 1_709_164_800),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("1969-12-31T23:59:59Z", -1),
            ("0001-01-01T00:00:00Z", -62_135_596_800),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
            ("2016-12-31T23:59:60Z", 1_483_228_800),  // a leap second reads as the next one
        ]
        for (text, seconds) in accepted {
            let date = try #require(RFC3339.date(text), "\(text)")
            #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_001, "\(text): \(date.timeIntervalSince1970)")
        }
        let refused = [
            "", "2025-01-01", "2025-01-01T00:00:00", "2025-01-01 00:00:00Z", "2025-01-01T00:00Z",
            "2025-01-01T9999999999:00:00Z", "999999999-01-01T00:00:00Z", "10000-01-01T00:00:00Z", "0000-12-31T00:00:00Z",
            "2025-1-1T1:2:3Z", "2025-01-01T00:00:00Zjunk", "2025-01-01T00:00:00+09:00:00", "2025-01-01T00:00:00.Z",
            "2025-13-01T00:00:00Z", "2025-00-01T00:00:00Z", "2025-02-29T00:00:00Z", "2025-04-31T00:00:00Z", "2025-01-00T00:00:00Z",
            "2025-01-01T24:00:00Z", "2025-01-01T23:60:00Z", "2025-01-01T23:59:61Z", "2025-01-01T00:00:00+24:00",
            "2025-01-01T00:00:00+09:60", "2025-01-01T00:00:00+0900", "+2025-01-01T00:00:00Z", "２０２５-01-01T00:00:00Z",
            "2025-01-01T00:00:00.\(String(repeating: "1", count: 40))Z",
        ]
        for text in refused {
            #expect(RFC3339.date(text) == nil, "\(text)")
        }
        // Outside years 0001-9999 there is nothing to write: an error, not a trap or a wrong year.
        for seconds in [-62_135_596_801.0, 253_402_300_800, 1e300, -.infinity, .nan] {
            #expect(RFC3339.string(Date(timeIntervalSince1970: seconds)) == nil, "\(seconds)")
        }
        #expect(RFC3339.string(.distantFuture) == "4001-01-01T00:00:00.000Z")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let millis = Int64.random(in: -62_135_596_800_000...253_402_300_799_999, using: &generator)
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let written = try #require(RFC3339.string(date))
            let read = try #require(RFC3339.date(written))
            #expect(Int64((read.timeIntervalSince1970 * 1000).rounded()) == millis, "\(millis)")
        }
    }

    @Test("FlatJSONReader reads strings with every escape, numbers, literals and string arrays")
    func readerAccepts() {
        let text = #"{ "a" : "x\"\\\/\b\f\n\r\t\u00e9\ud83e\uddea", "n": -12.5e1, "i": 1763800000, "t": true, "f": false, "z": null, "s": ["p", "q"], "e": [] }"#
        var members: [String: FlatJSONReader.Value] = [:]
        let ok = Array(text.utf8).withUnsafeBufferPointer {
            FlatJSONReader.read($0) {
                members[$0] = $1; return true
            }
        }
        #expect(ok)
        #expect(members["a"] == .string("x\"\\/\u{8}\u{C}\n\r\té🧪"))
        #expect(members["n"] == .number(-125))
        #expect(members["i"] == .number(1_763_800_000))
        #expect(members["t"] == .bool(true) && members["f"] == .bool(false) && members["z"] == .null)
        #expect(members["s"] == .strings(["p", "q"]) && members["e"] == .strings([]))
    }

    @Test(
        "FlatJSONReader refuses what is not one flat object",
        arguments: [
            "", "[]", "{", "{}x", #"{"a":{"b":1}}"#, #"{"a":[1]}"#, #"{"a":01}"#, #"{"a":1.}"#, #"{"a":.5}"#,
            #"{"a":"\x"}"#, #"{"a":"\ud83e"}"#, "{\"a\":\"tab\tinside\"}", #"{"a":tru}"#, #"{a:1}"#, #"{"a":1,}"#, #"{"a" 1}"#, #"{"a":"open}"#,
        ])
    func readerRefuses(_ text: String) {
        let ok = Array(text.utf8).withUnsafeBufferPointer { FlatJSONReader.read($0) { _, _ in true } }
        #expect(!ok)
    }

    @Test("FlatJSONReader stops and fails when the caller refuses a member")
    func readerCallerRefuses() {
        var seen: [String] = []
        let ok = Array(#"{"a":1,"b":2,"a":3}"#.utf8).withUnsafeBufferPointer {
            FlatJSONReader.read($0) { name, _ in
                defer { seen.append(name) }
                return !seen.contains(name)
            }
        }
        #expect(!ok && seen == ["a", "b", "a"])
    }

    @Test("FlatJSONReader refuses invalid UTF-8 inside a string")
    func readerRefusesInvalidUTF8() {
        let bytes: [UInt8] = Array(#"{"a":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(!bytes.withUnsafeBufferPointer { FlatJSONReader.read($0) { _, _ in true } })
    }
}
