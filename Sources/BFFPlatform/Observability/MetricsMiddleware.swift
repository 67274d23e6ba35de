import Hummingbird
import Logging
import Metrics
import NIOConcurrencyHelpers

extension HTTPRequest.Method {
    /// HTTP allows any token as a method; each would be a new series on `/metrics`.
    package var metricsLabel: String {
        switch self {
        case .get, .post, .put, .patch, .delete, .head, .options: rawValue
        default: "other"
        }
    }
}

/// Request count and latency by route template, method and status (route templates, never raw paths,
/// and the standard methods keep the label set bounded). Sits outside error mapping so it sees the
/// status the client gets.
package struct RequestMetricsMiddleware<Context: PlatformRequestContext>: RouterMiddleware {

    private let instruments = Instruments()

    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var response = try await next(request, context)
        let route = context.route?.template ?? "unmatched"
        let status = response.status.code
        let handles = instruments.handles(route: route, method: request.method.metricsLabel, status: status)
        let operation = context.route?.operationID ?? "none"
        guard response.body.contentLength == nil else {
            Self.finish(request, route: route, operation: operation, status: status, since: start, handles: handles, logger: context.logger)
            return response
        }
        // A streamed answer (a tutoring turn's events, the export) lasts until its last byte, not
        // until its handler returned.
        let body = response.body
        let logger = context.logger
        response.body = ResponseBody { writer in
            defer { Self.finish(request, route: route, operation: operation, status: status, since: start, handles: handles, logger: logger) }
            try await body.write(writer)
        }
        return response
    }

    /// Counts the request, records its duration and writes its access-log line.
    private static func finish(
        _ request: Request, route: String, operation: String, status: Int, since start: ContinuousClock.Instant,
        handles: (Counter, Metrics.Timer), logger: Logger
    ) {
        let elapsed = ContinuousClock.now - start
        handles.0.increment()
        handles.1.record(duration: elapsed)
        logger.log(
            level: status >= 500 ? .error : .info, "request",
            metadata: [
                "method": .string(request.method.rawValue),
                // The path only: query strings can carry authorization codes and state.
                "path": .string(request.uri.path),
                "route": .string(route),
                "operation": .string(operation),
                "status": .stringConvertible(status),
                "duration_ms": .stringConvertible(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000),
            ])
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
