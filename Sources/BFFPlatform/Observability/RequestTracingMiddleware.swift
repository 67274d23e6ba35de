import HTTPTypes
import Hummingbird
import Instrumentation
import Tracing

/// A server span per request (operations whose policy is untraced aside): named by method and route
/// template, with the status the client gets. It comes right after the operation is resolved, so
/// every log line of the request carries the trace id. The path, query and headers are not
/// recorded: paths carry chat ids, queries authorization codes, headers tokens.
///
/// A client's W3C `traceparent` is untrusted by default (`BFF_TRACE_TRUST_INCOMING=false`): its
/// sampled flag would let any app force or suppress tracing, so each request starts a new root span
/// and keeps the caller's context only as a link. Behind a gateway that sets `traceparent` itself,
/// `true` continues it.
package struct RequestTracingMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    let trustIncoming: Bool

    package init(trustIncoming: Bool) {
        self.trustIncoming = trustIncoming
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Telemetry.isTracing, context.route?.traced != false else { return try await next(request, context) }
        var incoming = InstrumentationContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &incoming, using: HTTPFieldsExtractor())
        let method = request.method.metricsLabel
        let span = InstrumentationSystem.tracer.startSpan(
            method, context: trustIncoming ? incoming : (InstrumentationContext.current ?? .topLevel), ofKind: .server)
        if !trustIncoming, request.headers[.traceparent] != nil {
            span.addLink(SpanLink(context: incoming, attributes: [:]))
        }
        span.attributes["http.request.method"] = method
        do {
            var response = try await InstrumentationContext.$current.withValue(span.context) {
                try await next(request, context)
            }
            let route = context.route?.template ?? "unmatched"
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
            span.operationName = "\(method) \(context.route?.template ?? "unmatched")"
            span.recordError(error)
            span.setStatus(.init(code: .error))
            span.end()
            throw error
        }
    }
}

extension HTTPField.Name {
    static let traceparent = HTTPField.Name("traceparent")!
}

private struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from carrier: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { carrier[$0] }
    }
}
