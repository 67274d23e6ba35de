import BFFWire
import Foundation
import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    package static let requestID = Self("X-Request-Id")!
}

/// Echoes a well-formed `X-Request-Id` or makes one, puts it on every log line and every response.
/// It is the outermost middleware, so it also turns anything that escaped the inner layers into the contract's error.
package struct RequestIDMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}


    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let requestID = Self.accepted(request.headers[.requestID]) ?? UUID.random().lowercasedString
        context.requestID = requestID
        context.logger[metadataKey: "request_id"] = .string(requestID)
        context.logger[metadataKey: "hb.request.id"] = .string(requestID)
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = ErrorMiddleware.response(for: error, context: context)
        }
        response.headers[.requestID] = requestID
        return response
    }

    /// A client id is kept only when it is short and harmless in a log line or header.
    static func accepted(_ value: String?) -> String? {
        guard let value, SafeIdentifier.isValid(value, length: 1...128) else { return nil }
        return value
    }
}
