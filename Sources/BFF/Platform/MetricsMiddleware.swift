import Hummingbird
import Logging
import Metrics

/// Request count and latency by route template, method and status (route templates, never raw paths,
/// keep the label set bounded). Sits outside error mapping so it sees the status the client gets.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let dimensions = [
            ("route", context.endpointPath ?? "unmatched"),
            ("method", request.method.rawValue),
            ("status", String(response.status.code)),
        ]
        Counter(label: "bff_http_requests_total", dimensions: dimensions).increment()
        Metrics.Timer(label: "bff_http_request_duration_seconds", dimensions: dimensions).record(duration: elapsed)
        let level: Logger.Level = response.status.code >= 500 ? .error : .info
        context.logger.log(level: level, "request", metadata: [
            "method": .string(request.method.rawValue),
            // The path only: query strings can carry authorization codes and state.
            "path": .string(request.uri.path),
            "route": .string(context.endpointPath ?? "unmatched"),
            "status": .stringConvertible(response.status.code),
            "duration_ms": .stringConvertible(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000),
        ])
        return response
    }
}
