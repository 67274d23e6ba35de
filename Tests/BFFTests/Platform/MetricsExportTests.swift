import AsyncHTTPClient
import Foundation
import NIOCore
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// Container Apps cannot scrape: with an OTLP metrics endpoint, the same metrics also go out over
/// OTLP/HTTP, with the same buckets, while the admin listener goes on serving Prometheus.
@Suite("Metrics over OTLP/HTTP", .needsDatabase, .timeLimit(.minutes(2)))
struct MetricsExportTests {
    @Test("bff serve exports counters, histograms with the Prometheus buckets and process gauges to the collector, and stops cleanly")
    func export() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let collector = LocalOTLPCollector()
        try await serveHTTP1(collector.router, logger: TestEnvironment.quietLogger) { collectorBase in
            let environment = TestEnvironment.serverEnvironment(
                database: database,
                [
                    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "\(collectorBase)/v1/metrics", "OTEL_METRIC_EXPORT_INTERVAL": "300",
                    "BFF_JOBS_CONCURRENCY": "0", "BFF_ADMIN_PORT": "0", "BFF_SHUTDOWN_GRACE": "5",
                ])
            let server = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
            defer { server.stop() }
            #expect(try await server.becomesReady())
            for _ in 0..<3 { #expect(try await BFFProcess.send(.GET, "\(server.base)/api/v1/me", token: learner.accessToken).status == 200) }

            let wanted = ["bff_http_requests_total", "bff_http_request_duration_seconds", "process_resident_memory_bytes", "bff_build_info", "bff_ready"]
            let arrived = try await eventually(within: .seconds(20)) {
                let names = Set(collector.metrics.withLockedValue { $0 }.map(\.name))
                return wanted.allSatisfy(names.contains)
            }
            let metrics = collector.metrics.withLockedValue { $0 }
            #expect(arrived, "\(Set(metrics.map(\.name)).sorted())")
            #expect(metrics.first { $0.name == "bff_http_requests_total" }?.kind == .sum)
            #expect(metrics.first { $0.name == "process_resident_memory_bytes" }?.kind == .gauge)
            let histogram = try #require(metrics.first { $0.name == "bff_http_request_duration_seconds" })
            #expect(histogram.kind == .histogram)
            #expect(histogram.bounds == MetricBuckets.defaultDuration.map(\.seconds), "\(histogram.bounds)")
            #expect(histogram.resource["service.name"] == "bff" && histogram.resource["service.version"] == BuildInfo.version)
            // No traces endpoint: nothing else is sent.
            #expect(collector.exports.withLockedValue { $0 } == 0)
            #expect(collector.violations.withLockedValue { $0 }.isEmpty)

            let stopping = ContinuousClock.now
            kill(server.process.processIdentifier, SIGTERM)
            server.process.waitUntilExit()
            #expect(server.process.terminationStatus == 0, "\(server.logLines().suffix(5))")
            #expect(ContinuousClock.now - stopping < .seconds(8))
        }
    }

    @Test("the collector refuses what a collector refuses: another content type, a metric without a name or with two kinds, a histogram whose buckets do not fit its bounds")
    func collectorIsStrict() async throws {
        let collector = LocalOTLPCollector()
        try await serveHTTP1(collector.router, logger: TestEnvironment.quietLogger) { (base: String) async throws in
            func post(_ body: [UInt8], type: String = "application/x-protobuf") async throws -> UInt {
                var request = HTTPClientRequest(url: "\(base)/v1/metrics")
                request.method = .POST
                request.headers.add(name: "Content-Type", value: type)
                request.body = .bytes(ByteBuffer(bytes: body))
                return try await HTTPClient.shared.execute(request, timeout: .seconds(10)).status.code
            }
            let sum = Proto.field(7, Proto.field(1, []))
            func histogram(bounds: [Double], buckets: [UInt64], count: UInt64) -> [UInt8] {
                let point =
                    Proto.fixed64(4, count) + Proto.field(6, buckets.flatMap(Proto.littleEndian))
                    + Proto.field(7, bounds.flatMap { Proto.littleEndian($0.bitPattern) })
                return Proto.field(9, Proto.field(1, point))
            }
            func request(_ metric: [UInt8]) -> [UInt8] { Proto.field(1, Proto.field(2, Proto.field(2, metric))) }
            let named = Proto.field(1, Array("bff_x".utf8))

            #expect(try await post(request(named + sum)) == 200)
            #expect(try await post(request(named + histogram(bounds: [0.5, 1], buckets: [1, 0, 2], count: 3))) == 200)
            #expect(try await post(request(named + sum), type: "application/json") == 415)
            #expect(try await post(request(sum)) == 400, "no name")
            #expect(try await post(request(named + sum + Proto.field(5, []))) == 400, "a sum and a gauge")
            #expect(try await post(request(named + histogram(bounds: [0.5, 1], buckets: [1, 2], count: 3))) == 400, "a bucket short")
            #expect(try await post(request(named + histogram(bounds: [1, 0.5], buckets: [1, 0, 2], count: 3))) == 400, "bounds descending")
            #expect(try await post(request(named + histogram(bounds: [0.5, 1], buckets: [1, 0, 2], count: 4))) == 400, "counts short of the total")
            #expect(collector.metrics.withLockedValue { $0.count } == 2)
            #expect(collector.violations.withLockedValue { $0.count } == 6)
        }
    }
}

/// Protocol Buffers' wire format, written by hand for the collector's test.
private enum Proto {
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    static func field(_ number: UInt64, _ bytes: [UInt8]) -> [UInt8] { varint(number << 3 | 2) + varint(UInt64(bytes.count)) + bytes }
    static func fixed64(_ number: UInt64, _ value: UInt64) -> [UInt8] { varint(number << 3 | 1) + littleEndian(value) }
    static func littleEndian(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
}
