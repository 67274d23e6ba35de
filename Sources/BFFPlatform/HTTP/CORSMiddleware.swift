import HTTPTypes
import Hummingbird

/// CORS for the web origins of `BFF_CORS_ORIGINS` only (docs/architecture.md#the-http-contracts-rules): other origins get no CORS headers,
/// credentials are never allowed, and every OPTIONS preflight is answered 204 without reaching a handler.
package struct CORSMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    let allowedOrigins: Set<String>

    package init(allowedOrigins: Set<String>) {
        self.allowedOrigins = allowedOrigins
    }

    static var allowHeaders: String { "Authorization, Content-Type, Idempotency-Key, X-Request-Id" }
    static var allowMethods: String { "GET, POST, PUT, PATCH, DELETE, OPTIONS" }
    static var exposeHeaders: String { "X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Location" }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let origin = request.headers[.origin].flatMap { allowedOrigins.contains($0) ? $0 : nil }
        var response: Response
        if request.method == .options {
            response = Response(status: .noContent)
            if origin != nil {
                response.headers[.accessControlAllowMethods] = Self.allowMethods
                response.headers[.accessControlAllowHeaders] = Self.allowHeaders
                response.headers[.accessControlMaxAge] = "600"
            }
        } else {
            response = try await next(request, context)
            if origin != nil {
                response.headers[.accessControlExposeHeaders] = Self.exposeHeaders
            }
        }
        if let origin {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "false"
        }
        response.headers[values: .vary].append("Origin")
        return response
    }
}
