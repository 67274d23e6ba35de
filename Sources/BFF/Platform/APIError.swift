import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The one error shape of the HTTP contract: a status and the body `{code, message}` (DESIGN §4).
public struct APIError: Error, Sendable, Equatable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func == (lhs: APIError, rhs: APIError) -> Bool {
        lhs.status == rhs.status && lhs.code == rhs.code && lhs.message == rhs.message
    }

    public static func validation(_ field: String, _ problem: String) -> APIError {
        APIError(.unprocessableContent, "validation_failed", "\(field): \(problem)")
    }

    public static let notFound = APIError(.notFound, "not_found", "The requested resource does not exist.")
    public static let notImplemented = APIError(
        .notImplemented, "not_implemented", "This operation is specified but not available yet.")
    public static let databaseUnavailable = APIError(
        .serviceUnavailable, "database_unavailable", "The database is unavailable; retry shortly.")
    public static let internalError = APIError(
        .internalServerError, "internal", "An internal error occurred; it has been logged with the request id.")

    /// The JSON response; `code` and `message` are escaped by the encoder, never interpolated.
    public func response() -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        let body = (try? JSONEncoder().encode(ErrorBody(code: code, message: message))) ?? Data()
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private struct ErrorBody: Encodable {
        let code: String
        let message: String
    }
}
