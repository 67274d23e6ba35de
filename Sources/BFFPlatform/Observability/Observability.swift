import Metrics
import Prometheus
import Synchronization

/// The process-wide metrics: the Prometheus registry the admin listener's `/metrics` shows and,
/// when an OTLP metrics endpoint is set, swift-otel's exporter beside it. swift-metrics allows one
/// bootstrap per process.
public enum Observability {
    public static let registry = PrometheusCollectorRegistry()
    private static let bootstrapped = Mutex(false)

    /// Bootstraps the metrics system if it is not yet, to Prometheus and to `otlp` when given: a
    /// handle made before that (the database pool's gauges, made when the pool is) stays a no-op for
    /// the life of the process, so commands call this before building anything.
    public static func bootstrap(alsoTo otlp: (any MetricsFactory)? = nil) {
        guard
            bootstrapped.withLock({ done in
                defer { done = true }; return !done
            })
        else { return }
        var prometheus = PrometheusMetricsFactory(registry: registry)
        prometheus.defaultDurationHistogramBuckets = MetricBuckets.defaultDuration
        prometheus.durationHistogramBuckets = MetricBuckets.durationByLabel
        MetricsSystem.bootstrap(otlp.map { MultiplexMetricsHandler(factories: [prometheus, $0]) } ?? prometheus)
        Gauge(label: "bff_build_info", dimensions: [("version", BuildInfo.version), ("commit", BuildInfo.commit)]).record(1)
        // Not ready until a readiness check says so.
        Gauge(label: "bff_ready").record(0)
        ProcessMetrics.sample()
    }

    /// The readiness check's verdict, for alerting on a process that stays unready.
    package static func recordReadiness(_ ready: Bool) {
        Gauge(label: "bff_ready").record(ready ? 1 : 0)
    }
}

/// Histogram buckets in seconds, fitted to each measure: the SLO alerts read their thresholds off
/// these (a p95 of 2 min needs buckets at 60, 120 and 300 s), and a measure whose buckets end
/// below its values reports only `+Inf`.
enum MetricBuckets {
    /// Requests, database calls, RevenueCat: milliseconds to seconds; a streamed turn runs to the
    /// LLM's 60 s total timeout.
    static let defaultDuration: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(120),
    ]

    static let durationByLabel: [String: [Duration]] = [
        // The notification SLO: 95 % of recalls pushed within 2 minutes of being due.
        "bff_recall_delivery_delay_seconds": seconds([1, 5, 15, 30, 60, 120, 300, 600, 1_800, 3_600]),
        // One push service call, up to its 30 s timeout.
        "bff_push_send_seconds": seconds([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]),
        "bff_llm_first_token_seconds": seconds([0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120]),
        "bff_llm_total_seconds": seconds([0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 120]),
        // From due to claimed: milliseconds normally, up to an hour behind a backlog.
        "bff_job_queue_delay_seconds": seconds([0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3_600]),
    ]

    private static func seconds(_ values: [Double]) -> [Duration] { values.map { .seconds($0) } }
}
