import HTTPTypes
import Hummingbird

/// `Strict-Transport-Security` whenever this process terminates TLS itself.
package struct HSTSMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}


    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.strictTransportSecurity] = "max-age=31536000; includeSubDomains"
        return response
    }
}
