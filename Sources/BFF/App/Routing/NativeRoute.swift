import Hummingbird

/// An operation of the contract answered on the router directly rather than through the generated
/// server (docs/architecture.md#the-fast-path). The build registers each and tells the generated
/// registration to only record it, from one list (`buildApplication`), so the two cannot disagree.
protocol NativeRoute: Sendable {
    static var method: HTTPRequest.Method { get }
    static var path: String { get }
    func respond(to request: Request, context: AppRequestContext) async throws -> Response
}

extension NativeRoute {
    func register(on router: Router<AppRequestContext>) {
        router.on(RouterPath(Self.path), method: Self.method) { request, context in
            try await respond(to: request, context: context)
        }
    }

    /// The operation's method and path template, as `RecordingTransport.servedNatively` takes them.
    var operation: (method: HTTPRequest.Method, path: String) { (Self.method, Self.path) }
}
