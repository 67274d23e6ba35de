import Hummingbird
import Logging

/// Every error thrown below it becomes `{code, message}` with its status; 500s and 503s are logged
/// with the request id (through `LoggableError`, so no credential reaches the log) and never show a
/// stack trace or SQL to the client.
///
/// It reads `Accept-Language` first, so that whatever answers below it (and its own error answers)
/// is worded in the language the request asks for; the learner's setting, known only after
/// authentication, is applied further down (`LearnerLanguageMiddleware`).
package struct ErrorMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}


    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let header = request.headers[.acceptLanguage] {
            context.requestedLanguage = Language.negotiate(header)
            context.language = context.requestedLanguage ?? .default
        }
        do {
            return try await next(request, context)
        } catch {
            return Self.response(for: error, context: context)
        }
    }

    /// The answer to `error`, in the context's language.
    package static func response(for error: any Error, context: Context) -> Response {
        if let apiError = ErrorMapping.apiError(for: error) {
            if apiError.status == .serviceUnavailable {
                context.logger.warning("dependency unavailable", metadata: ["code": .string(apiError.code.rawValue), "error": .string(LoggableError.describe(error))])
            }
            return apiError.response(in: context.language)
        }
        context.logger.error("unhandled error", metadata: ["error": .string(LoggableError.describe(error))])
        return APIError.internalError.response(in: context.language)
    }
}
