import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import BFFPlatform

/// The error body is written by hand (`APIError.body`); whatever a message holds, a JSON parser
/// reads back exactly the code and message, and nothing else.
@Suite("Error body")
struct ErrorBodyTests {
    private struct Body: Decodable, Equatable {
        let code: String
        let message: String
    }

    @Test(
        "any message survives the round trip through the body",
        arguments: [
            "plain",
            "quote \" and backslash \\ and slash /",
            "line\nbreak\r\ttab \u{08}\u{0C} and \u{01}\u{1F} controls",
            "学習を続けるにはログインしてください。",
            "emoji 🎓 and \u{2028} separator",
            "",
            #"{"code":"injected","message":"x"}"#,
        ])
    func roundTrip(message: String) throws {
        let error = APIError(.validationFailed, .announcement(message))
        let bytes = Data(buffer: error.body(in: .ja))
        let object = try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
        #expect(Set(object.keys) == ["code", "message"])
        #expect(try JSONDecoder().decode(Body.self, from: bytes) == Body(code: "validation_failed", message: message))
    }

    @Test("the response carries the status, the JSON content type, its language and the error's own headers")
    func response() throws {
        for language in Language.allCases {
            let response = APIError.invalidToken().response(in: language)
            #expect(response.status == .unauthorized)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(response.headers[.contentLanguage] == language.rawValue)
            #expect(response.headers[.wwwAuthenticate] == #"Bearer error="invalid_token""#)
            #expect(response.body.contentLength == APIError.invalidToken().body(in: language).readableBytes)
        }
    }
}
