import BFFPlatform
import Hummingbird

/// The first step of every request: the operation the router matched, put on the context with its
/// policy. The router has already resolved the path with its trie (empty segments and a trailing
/// slash skipped, no dot-segment removal, no percent-decoding, case-sensitive) and recorded the
/// matched template as `endpointPath`; the operation is that template and the method, so every
/// spelling the router takes for an operation gets exactly that operation's policy.
struct OperationResolutionMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let operations: OperationIndex

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.operation = context.endpointPath.flatMap { operations.operation(route: $0, method: request.method) }
        return try await next(request, context)
    }
}

/// Refuses a request the router matched to no operation, before any policy step: 404, or 405 with
/// `Allow` for a path the contract knows under other methods. Only the steps that answer every
/// request alike (request id, metrics, CORS preflights, error mapping) come before it.
struct UnroutedRefusalMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let routes: RouteTableBox

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.operation == nil else { return try await next(request, context) }
        if let allowed = routes.allowedMethods(for: request.uri.path) {
            let allow = allowed.joined(separator: ", ")
            throw APIError(.methodNotAllowed, .methodsAllowed(allow), headers: [.allow: allow])
        }
        throw APIError.notFound
    }
}
