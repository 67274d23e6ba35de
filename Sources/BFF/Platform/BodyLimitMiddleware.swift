import HTTPTypes
import Hummingbird
import NIOCore

/// Caps request bodies (64 KiB by default): a declared length over the cap is refused before reading,
/// and a streamed body is read at most up to the cap.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let limit: Int

    static let tooLarge = APIError(.payloadTooLarge)

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            return Self.tooLarge.response()
        }
        guard request.method != .get, request.method != .head else {
            return try await next(request, context)
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            // What a chunked body longer than the cap throws; only a declared length is checked above.
            return Self.tooLarge.response()
        }
        return try await next(request, context)
    }
}
