import Hummingbird
import Logging

/// Every error thrown below it becomes `{code, message}` with its status; 500s and 503s are logged
/// with the request id (through `LoggableError`, so no credential reaches the log) and never show a
/// stack trace or SQL to the client.
package struct ErrorMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}


    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return Self.response(for: error, context: context)
        }
    }

    package static func response(for error: any Error, context: Context) -> Response {
        if let apiError = ErrorMapping.apiError(for: error) {
            if apiError.status == .serviceUnavailable {
                context.logger.warning("dependency unavailable", metadata: ["code": .string(apiError.code.rawValue), "error": .string(LoggableError.describe(error))])
            }
            return apiError.response()
        }
        context.logger.error("unhandled error", metadata: ["error": .string(LoggableError.describe(error))])
        return APIError.internalError.response()
    }
}
