import Hummingbird

/// Generated handlers take no context argument: publish it as a task local for them.
struct OpenAPIContextMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await AppRequestContext.$current.withValue(context) {
            try await next(request, context)
        }
    }
}
