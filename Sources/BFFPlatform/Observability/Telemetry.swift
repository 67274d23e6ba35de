import Dispatch
import Instrumentation
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// OpenTelemetry traces and metrics, exported over OTLP/HTTP to the collector the standard `OTEL_*`
/// variables name; without one, nothing is traced and no span is made. Spans carry route templates,
/// operation names and statuses, never a user id, token or path with an id in it.
public enum Telemetry {
    /// Set once, before the server or worker starts; read by every request, database call and
    /// outbound call, so that a process without a collector pays one load for each.
    private static let tracing = Atomic(false)

    package static var isTracing: Bool { tracing.load(ordering: .relaxed) }

    /// Starts what the standard `OTEL_*` variables ask for, before anything records a metric:
    /// - traces, when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
    ///   the exporter's tracer becomes the process's;
    /// - metrics, when `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
    ///   beside the Prometheus registry: Azure Container Apps cannot scrape, so its collector app
    ///   receives them over OTLP;
    /// unless `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER=none` or `OTEL_METRICS_EXPORTER=none` turn
    /// them off. Also bootstraps the metrics system. The returned services must run alongside the
    /// server or worker and stop after it, so that the last spans and metrics are sent.
    public static func start(environment: [String: String], logger: Logger) throws -> [any Service] {
        var services: [any Service] = []
        var configuration = OTel.Configuration.default
        configuration.serviceName = "bff"
        configuration.resourceAttributes = ["service.version": BuildInfo.version]
        // Logs stay on stdout.
        configuration.logs.enabled = false
        var diagnostics = logger
        diagnostics[metadataKey: "component"] = "otel"
        configuration.diagnosticLogger = .custom(diagnostics)
        if try exportConfigured(.metrics, environment) {
            var metrics = configuration
            metrics.traces.enabled = false
            metrics.metrics.defaultDurationHistogramBuckets = MetricBuckets.defaultDuration
            metrics.metrics.durationHistogramBuckets = MetricBuckets.durationByLabel
            // The last export runs at shutdown, inside the drain's grace: a collector that stalls
            // must not hold the process for OTel's default 30 s (OTEL_METRIC_EXPORT_TIMEOUT still wins).
            metrics.metrics.exportTimeout = .seconds(5)
            let backend = try OTel.makeMetricsBackend(configuration: metrics)
            Observability.bootstrap(alsoTo: backend.factory)
            services.append(OffTheEventLoops(backend.service))
            logger.info("exporting metrics over OTLP/HTTP", metadata: ["endpoint": .string(endpoint(.metrics, environment) ?? "")])
        } else {
            Observability.bootstrap()
        }
        if try exportConfigured(.traces, environment) {
            var traces = configuration
            traces.metrics.enabled = false
            let backend = try OTel.makeTracingBackend(configuration: traces)
            InstrumentationSystem.bootstrap(backend.factory)
            tracing.store(true, ordering: .relaxed)
            services.append(backend.service)
            logger.info("exporting traces over OTLP/HTTP", metadata: ["endpoint": .string(endpoint(.traces, environment) ?? "")])
        }
        return services
    }

    enum Signal: String {
        case traces = "TRACES"
        case metrics = "METRICS"
    }

    /// Whether the variables ask for export of `signal`; a protocol or exporter this build lacks is
    /// a start-up error naming its variable (swift-otel would stop the process on the first export
    /// instead).
    static func exportConfigured(_ signal: Signal, _ environment: [String: String]) throws -> Bool {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return false }
        let exporterVariable = "OTEL_\(signal.rawValue)_EXPORTER"
        if let exporter = environment[exporterVariable] {
            switch exporter.lowercased() {
            case "none": return false
            case "otlp": break
            default: throw ConfigurationError(exporterVariable, "must be otlp or none")
            }
        }
        for variable in ["OTEL_EXPORTER_OTLP_\(signal.rawValue)_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            guard let value = environment[variable] else { continue }
            guard ["http/protobuf", "http/json"].contains(value) else {
                throw ConfigurationError(variable, "must be http/protobuf or http/json: this build exports OTLP over HTTP only (port 4318), not gRPC")
            }
        }
        return endpoint(signal, environment) != nil
    }

    private static func endpoint(_ signal: Signal, _ environment: [String: String]) -> String? {
        for variable in ["OTEL_EXPORTER_OTLP_\(signal.rawValue)_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"] {
            if let value = environment[variable], !value.isEmpty { return value }
        }
        return nil
    }

    /// Logger metadata from the current span: `trace_id` (and `span_id`) on every line logged inside one.
    package static let logMetadata = OTel.makeLoggingMetadataProvider()

    /// Runs `body` in a child span of the current one, or plainly when nothing is traced.
    package static func span<Result>(
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

/// Runs a service, and every task it starts, on a thread of its own instead of the event loops.
/// swift-otel's metrics exporter shuts its HTTP client down synchronously when the service's group
/// lets go of it at the end, which AsyncHTTPClient refuses, with a crash, on an event loop, where
/// `bff` runs every task (EventLoopGlobalExecutor). The tracer's exporter is not let go of: the
/// tracing system holds it until the process ends.
struct OffTheEventLoops: Service {
    let service: any Service
    private let executor = QueueTaskExecutor(label: "bff.otel-metrics")

    init(_ service: some Service) { self.service = service }

    func run() async throws {
        try await withTaskExecutorPreference(executor) { try await service.run() }
    }
}

final class QueueTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
