import BFFPlatform
import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let idempotencyKey = Self("Idempotency-Key")!
}

/// Generated handlers take no context argument: publish it as a task local for them.
struct OpenAPIContextMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if request.method == .post {
            context.idempotencyKey = request.headers[.idempotencyKey]
            context.acceptsEventStream = request.headers[.accept].map { AcceptHeader.accepts($0, "text/event-stream") } ?? false
        }
        return try await AppRequestContext.$current.withValue(context) {
            try await next(request, context)
        }
    }
}
