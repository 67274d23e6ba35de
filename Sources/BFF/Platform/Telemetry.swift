import Instrumentation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// OpenTelemetry traces, exported over OTLP/HTTP to the collector the standard `OTEL_*` variables
/// name; without one, nothing is traced and no span is made. Spans carry route templates,
/// operation names and statuses, never a user id, token or path with an id in it.
public enum Telemetry {
    /// Set once, before the server or worker starts; read by every request, database call and
    /// outbound call, so that a process without a collector pays one load for each.
    private static let tracing = Atomic(false)

    static var isTracing: Bool { tracing.load(ordering: .relaxed) }

    /// Starts the exporter when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// is set (and `OTEL_SDK_DISABLED` / `OTEL_TRACES_EXPORTER=none` do not turn it off), and makes
    /// its tracer the process's. The returned service must run alongside the server and stop after
    /// it, so that the spans of the last requests are sent.
    public static func start(environment: [String: String], logger: Logger) throws -> (any Service)? {
        guard try exportConfigured(environment) else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "bff"
        configuration.resourceAttributes = ["service.version": Commands.version]
        // Metrics stay on `/metrics` and logs on stdout: only traces go to the collector.
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        var diagnostics = logger
        diagnostics[metadataKey: "component"] = "otel"
        configuration.diagnosticLogger = .custom(diagnostics)
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        tracing.store(true, ordering: .relaxed)
        logger.info("exporting traces over OTLP/HTTP", metadata: ["endpoint": .string(endpoint(environment) ?? "")])
        return backend.service
    }

    /// Whether the variables ask for export; a protocol or exporter this build lacks is a start-up
    /// error naming its variable (swift-otel would stop the process on the first span instead).
    static func exportConfigured(_ environment: [String: String]) throws -> Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        if let exporter = environment["OTEL_TRACES_EXPORTER"] {
            switch exporter.lowercased() {
            case "none": return false
            case "otlp": break
            default: throw ConfigurationError("OTEL_TRACES_EXPORTER", "must be otlp or none")
            }
        }
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            guard let value = environment[variable] else { continue }
            guard ["http/protobuf", "http/json"].contains(value) else {
                throw ConfigurationError(variable, "must be http/protobuf or http/json: this build exports OTLP over HTTP only (port 4318), not gRPC")
            }
        }
        return endpoint(environment) != nil
    }

    private static func endpoint(_ environment: [String: String]) -> String? {
        for variable in ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"] {
            if let value = environment[variable], !value.isEmpty { return value }
        }
        return nil
    }

    /// Logger metadata from the current span: `trace_id` (and `span_id`) on every line logged inside one.
    static let logMetadata = OTel.makeLoggingMetadataProvider()

    /// Runs `body` in a child span of the current one, or plainly when nothing is traced.
    static func span<Result>(
        _ name: String, kind: SpanKind = .internal, attributes: SpanAttributes = [:],
        isolation: isolated (any Actor)? = #isolation, _ body: (any Span) async throws -> Result
    ) async rethrows -> Result {
        guard isTracing else { return try await body(NoOpTracer.NoOpSpan(context: .topLevel)) }
        return try await withSpan(name, ofKind: kind, isolation: isolation) { span in
            span.attributes.merge(attributes)
            return try await body(span)
        }
    }
}
