import Hummingbird
import Logging
import Metrics
import NIOConcurrencyHelpers

/// Request count and latency by route template, method and status (route templates, never raw paths,
/// and the standard methods keep the label set bounded). Sits outside error mapping so it sees the
/// status the client gets.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    private let instruments = Instruments()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let route = context.operation?.path ?? "unmatched"
        let (count, duration) = instruments.handles(route: route, method: Self.methodLabel(request.method), status: response.status.code)
        count.increment()
        duration.record(duration: elapsed)
        let level: Logger.Level = response.status.code >= 500 ? .error : .info
        context.logger.log(
            level: level, "request",
            metadata: [
                "method": .string(request.method.rawValue),
                // The path only: query strings can carry authorization codes and state.
                "path": .string(request.uri.path),
                "route": .string(route),
                "operation": .string(context.operation?.id ?? "none"),
                "status": .stringConvertible(response.status.code),
                "duration_ms": .stringConvertible(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000),
            ])
        return response
    }

    /// HTTP allows any token as a method; each would be a new series on `/metrics`.
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .post, .put, .patch, .delete, .head, .options: method.rawValue
        default: "other"
        }
    }

    /// The counter and timer of each label set, made once: the metrics factory otherwise builds the
    /// labels and looks both up in its registry on every request. Bounded like the labels are.
    private final class Instruments: Sendable {
        private struct Labels: Hashable {
            let route: String
            let method: String
            let status: Int
        }

        private let made = NIOLockedValueBox<[Labels: (Counter, Metrics.Timer)]>([:])

        func handles(route: String, method: String, status: Int) -> (Counter, Metrics.Timer) {
            let labels = Labels(route: route, method: method, status: status)
            if let handles = made.withLockedValue({ $0[labels] }) { return handles }
            let dimensions = [("route", route), ("method", method), ("status", String(status))]
            let handles = (
                Counter(label: "bff_http_requests_total", dimensions: dimensions),
                Metrics.Timer(label: "bff_http_request_duration_seconds", dimensions: dimensions)
            )
            made.withLockedValue { $0[labels] = handles }
            return handles
        }
    }
}
