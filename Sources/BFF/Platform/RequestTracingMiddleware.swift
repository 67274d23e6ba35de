import HTTPTypes
import Hummingbird
import Instrumentation
import Tracing

/// A server span per request (probes aside), continuing the caller's W3C `traceparent`: named by method and route
/// template, with the status the client gets. It is the outermost middleware, so every log line of
/// the request carries the trace id. The path, query and headers are not recorded: paths carry
/// chat ids, queries authorization codes, headers tokens.
struct RequestTracingMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    /// Asked every few seconds by the orchestrator and the metrics scraper: a trace each would bury the requests.
    static let probes: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Telemetry.isTracing, !Self.probes.contains(request.uri.path) else { return try await next(request, context) }
        var parent = InstrumentationContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let method = RequestMetricsMiddleware.methodLabel(request.method)
        let span = InstrumentationSystem.tracer.startSpan(method, context: parent, ofKind: .server)
        span.attributes["http.request.method"] = method
        do {
            var response = try await InstrumentationContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            let route = context.endpointPath ?? "unmatched"
            span.operationName = "\(method) \(route)"
            // One update: each assignment to an OTel span's attributes takes its lock.
            span.updateAttributes { attributes in
                attributes["http.route"] = route
                attributes["http.response.status_code"] = Int(response.status.code)
                if let requestID = response.headers[.requestID] { attributes["bff.request_id"] = requestID }
            }
            if response.status.code >= 500 { span.setStatus(.init(code: .error)) }
            guard response.body.contentLength == nil else {
                span.end()
                return response
            }
            // A streamed body (a tutoring turn, an export) is part of the request.
            let body = response.body
            response.body = ResponseBody { writer in
                defer { span.end() }
                try await body.write(writer)
            }
            return response
        } catch {
            span.operationName = "\(method) \(context.endpointPath ?? "unmatched")"
            span.recordError(error)
            span.setStatus(.init(code: .error))
            span.end()
            throw error
        }
    }
}

private struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from carrier: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { carrier[$0] }
    }
}
