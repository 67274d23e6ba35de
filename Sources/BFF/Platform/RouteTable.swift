import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import OpenAPIHummingbird
import OpenAPIRuntime

/// The paths and methods the contract declares, learnt while the generated operations register.
struct RouteTable: Sendable {
    private var entries: [(template: String, segments: [Substring], methods: [String])] = []

    /// The path as the router matches it. The router skips empty segments, so `//api/v1//auth/start/`
    /// reaches the same handler as `/api/v1/auth/start`, and a middleware must treat it alike.
    static func routedPath(_ path: String) -> String {
        guard path.utf8.count > 1, path.utf8.last == UInt8(ascii: "/") || hasEmptySegment(path) else { return path }
        return "/" + path.split(separator: "/").joined(separator: "/")
    }

    /// Whether two slashes follow each other, read byte by byte: `String.contains("//")` resolves to
    /// Foundation's `range(of:)`, which on the chat list (three calls a request) took 0.8 % of the
    /// server's CPU in `perf`.
    private static func hasEmptySegment(_ path: String) -> Bool {
        var previous: UInt8 = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/"), previous == byte { return true }
            previous = byte
        }
        return false
    }

    mutating func add(path: String, method: HTTPRequest.Method) {
        let segments = path.split(separator: "/")
        if let index = entries.firstIndex(where: { $0.segments == segments }) {
            entries[index].methods.append(method.rawValue)
        } else {
            entries.append((path, segments, [method.rawValue]))
        }
    }

    /// The methods declared for a concrete request path, or nil when no template matches it.
    func allowedMethods(for path: String) -> [String]? {
        entry(for: path)?.methods.sorted()
    }

    /// The operation a request is for, as `"METHOD /template"`, or nil when the contract has none.
    func operation(for path: String, method: HTTPRequest.Method) -> String? {
        guard let entry = entry(for: path), entry.methods.contains(method.rawValue) else { return nil }
        return "\(method.rawValue) \(entry.template)"
    }

    private func entry(for path: String) -> (template: String, segments: [Substring], methods: [String])? {
        let requested = path.split(separator: "/")
        return entries.first { entry in
            entry.segments.count == requested.count
                && zip(entry.segments, requested).allSatisfy { template, actual in
                    template.hasPrefix("{") || template == actual
                }
        }
    }
}

/// Shared between the transport that fills it at start-up and the middleware that reads it.
final class RouteTableBox: Sendable {
    private let table = NIOLockedValueBox(RouteTable())

    func add(path: String, method: HTTPRequest.Method) {
        table.withLockedValue { $0.add(path: path, method: method) }
    }

    func allowedMethods(for path: String) -> [String]? {
        table.withLockedValue { $0.allowedMethods(for: path) }
    }

    func operation(for path: String, method: HTTPRequest.Method) -> String? {
        table.withLockedValue { $0.operation(for: path, method: method) }
    }
}

/// A `ServerTransport` that registers the generated operations on the router and records them.
/// Operations in `servedNatively` are only recorded: a hand-written route answers them.
struct RecordingTransport: ServerTransport {
    let router: Router<AppRequestContext>
    let routes: RouteTableBox
    var servedNatively: [(method: HTTPRequest.Method, path: String)] = []

    func register(
        _ handler: @escaping @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method,
        path: String
    ) throws {
        if !servedNatively.contains(where: { $0.method == method && $0.path == path }) {
            router.register(handler, method: method, path: path)
        }
        routes.add(path: path, method: method)
    }
}

/// A known path asked with a method it does not declare is 405 with `Allow`, not 404.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let routes: RouteTableBox

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            guard let allowed = routes.allowedMethods(for: request.uri.path) else { throw error }
            let allow = allowed.joined(separator: ", ")
            throw APIError(.methodNotAllowed, "This path accepts \(allow).", headers: [.allow: allow])
        }
    }
}
