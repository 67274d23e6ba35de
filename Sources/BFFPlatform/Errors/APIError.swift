import BFFWire
import HTTPTypes
import Hummingbird
import NIOCore

/// The one error shape of the HTTP contract: a status and the body `{code, message}` (docs/architecture.md#the-http-contracts-rules).
/// The status is the code's (`ErrorCode`); handlers throw these, and `ErrorMapping` turns library
/// and domain errors into them. The message is a catalogue entry, worded in the caller's language
/// only when the answer is written (`response(in:)`).
public struct APIError: Error, Sendable, Equatable {
    public var status: HTTPResponse.Status
    public var code: ErrorCode
    public var message: Phrase
    public var headers: HTTPFields

    public init(_ code: ErrorCode, _ message: Phrase? = nil, headers: HTTPFields = [:]) {
        self.init(code, status: code.status, message, headers: headers)
    }

    /// With another status than the code's: only for a status the framework chose (`ErrorMapping`).
    init(_ code: ErrorCode, status: HTTPResponse.Status, _ message: Phrase? = nil, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message ?? .error(code)
        self.headers = headers
    }

    public static func == (lhs: APIError, rhs: APIError) -> Bool {
        lhs.status == rhs.status && lhs.code == rhs.code && lhs.message == rhs.message
    }

    public static func validation(_ field: String, _ problem: Phrase.Problem) -> APIError {
        APIError(.validationFailed, .invalid(field: field, problem))
    }

    public static let notFound = APIError(.notFound)
    public static let databaseUnavailable = APIError(.databaseUnavailable)
    public static let internalError = APIError(.internal)
    // 400, not 406: the contract lists the statuses an error may have, and 406 is not among them.
    package static let notAcceptable = APIError(.notAcceptable)
    package static let payloadTooLarge = APIError(.payloadTooLarge)

    /// 401 with the challenge RFC 6750 §3 asks for.
    package static func invalidToken(_ message: Phrase = .error(.invalidToken)) -> APIError {
        APIError(.invalidToken, message, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""])
    }

    /// The JSON response; `code` and `message` are escaped by `JSONWriter`, never interpolated.
    /// Not `JSONEncoder`: every refused request pays for this body (a flood of 401s or 429s too),
    /// and the encoder was a tenth of a 404's server CPU (perf on `scripts/bench list`'s floor).
    public func response(in language: Language) -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLanguage] = language.rawValue
        return Response(status: status, headers: fields, body: .init(byteBuffer: body(in: language)))
    }

    /// `{"code":…,"message":…}`.
    package func body(in language: Language) -> ByteBuffer {
        let message = self.message.text(in: language)
        var json = JSONWriter(capacity: 32 + code.rawValue.utf8.count + message.utf8.count)
        json.raw("{")
        json.key("code")
        json.string(code.rawValue)
        json.raw(",")
        json.key("message")
        json.string(message)
        json.raw("}")
        return json.buffer
    }
}
