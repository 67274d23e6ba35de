import HTTPTypes
import Hummingbird

/// `Strict-Transport-Security` whenever this process terminates TLS itself.
struct HSTSMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.strictTransportSecurity] = "max-age=31536000; includeSubDomains"
        return response
    }
}
