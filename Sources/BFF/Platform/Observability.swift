import Metrics
import Prometheus

/// The process-wide metrics registry behind `/metrics`; swift-metrics allows one bootstrap per process.
public enum Observability {
    public static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .seconds(2.5), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }()

    /// Bootstraps the metrics system if it is not yet: a handle made before that (the database
    /// pool's gauges, made when the pool is) stays a no-op for the life of the process.
    public static func bootstrap() {
        _ = registry
    }
}
