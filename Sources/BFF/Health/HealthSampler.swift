import BFFPlatform
import ServiceLifecycle

/// Keeps `bff_ready` and the process metrics current when nothing asks: a worker whose probes are
/// off, the OTLP exporter between scrapes. The alerts on readiness read the gauge, not the probes.
struct HealthSampler: Service {
    let readiness: AdminListener.Readiness
    var interval: Duration = .seconds(15)

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            _ = await readiness()
            ProcessMetrics.sample()
            do { try await gracefulShutdownAwareSleep(for: interval) } catch { return }
        }
    }
}
