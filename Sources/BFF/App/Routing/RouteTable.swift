import BFFPlatform
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import OpenAPIHummingbird
import OpenAPIRuntime

/// The paths and methods the contract declares, learnt while the generated operations register: what
/// tells a 405 (a known path, another method) from a 404. It matches paths as the router's trie does
/// (empty segments skipped, case-sensitive, `{name}` any one segment).
struct RouteTable: Sendable {
    private var entries: [(template: String, segments: [Substring], methods: [String])] = []

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

    func contains(path: String, method: HTTPRequest.Method) -> Bool {
        entries.contains { $0.template == path && $0.methods.contains(method.rawValue) }
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

    func contains(path: String, method: HTTPRequest.Method) -> Bool {
        table.withLockedValue { $0.contains(path: path, method: method) }
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
        guard OperationTable.index.operation(route: path, method: method) != nil else {
            throw StartupError("the contract's \(method.rawValue) \(path) has no entry in OperationTable, so no policy")
        }
        if !servedNatively.contains(where: { $0.method == method && $0.path == path }) {
            router.register(handler, method: method, path: path)
        }
        routes.add(path: path, method: method)
    }

    /// Every contract operation of `OperationTable` was registered: a table entry without a route
    /// would be a policy nothing enforces.
    func requireEveryOperation() throws {
        for operation in OperationTable.contract where !routes.contains(path: operation.path, method: operation.method) {
            throw StartupError("OperationTable's \(operation.id) is not an operation of the contract")
        }
    }
}
