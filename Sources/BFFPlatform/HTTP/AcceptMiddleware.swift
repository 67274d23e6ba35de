import Foundation
import HTTPTypes
import Hummingbird

/// Refuses, before any handler runs, a request whose `Accept` the JSON answer cannot satisfy. The
/// generated code checks `Accept` only when it serializes the output, after the operation has
/// created, renamed or rotated: the client got a 500 and a retry did the work twice.
package struct AcceptMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}


    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let answers = context.route?.answers ?? .json
        guard let accept = request.headers[.accept], answers != .anything, !AcceptHeader.acceptsJSON(accept),
            !(answers == .jsonOrEventStream && AcceptHeader.accepts(accept, "text/event-stream"))
        else {
            return try await next(request, context)
        }
        throw APIError.notAcceptable
    }
}

/// How the server reads `Accept`.
package enum AcceptHeader {
    /// Whether `accept` names `mediaType` itself (parameters ignored).
    package static func accepts(_ accept: String, _ mediaType: String) -> Bool {
        accept.split(separator: ",").contains { value in
            value.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == mediaType
        }
    }

    /// The runtime's reading of `Accept` (OpenAPIRuntime's `validateAcceptIfPresent`), so that what
    /// passes here cannot fail there: media ranges in order, parameters (`q` too) ignored, and a
    /// malformed range before the first match is a refusal.
    package static func acceptsJSON(_ accept: String) -> Bool {
        let values = accept.split(separator: ",")
        if values.isEmpty { return true }
        for value in values {
            guard let first = value.split(separator: ";").first else { return false }
            let range = first.trimmingCharacters(in: .whitespaces).lowercased()
            if range == "application/json" { return true }
            let parts = range.split(separator: "/")
            guard parts.count == 2, parts[0] != "*" || parts[1] == "*" else { return false }
            if parts[0] == "*" || (parts[0] == "application" && parts[1] == "*") { return true }
        }
        return false
    }
}
