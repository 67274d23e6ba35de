import Foundation
import Hummingbird
import Logging
import NIOCore

/// Metrics and probes on a port of their own, for `bff serve` and `bff jobs work` alike: the worker
/// has no public port, and what Prometheus scrapes (routes, job kinds, pool use) is not for the
/// internet. The public port keeps `/healthz` and `/readyz` (contract operations, which load
/// balancers probe); `/metrics` is only here.
public enum AdminListener {
    public struct Configuration: Sendable, Equatable {
        public var host: String
        /// 0: a port the system picks, logged at start (tests, benchmarks).
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Nil when `BFF_ADMIN_PORT` is `off`; `BFF_ADMIN_HOST` defaults to `BFF_HTTP_HOST`'s value.
        package init?(_ reader: EnvironmentReader) throws {
            let raw = reader.string("BFF_ADMIN_PORT", default: "9090")
            if raw == "off" { return nil }
            guard let port = Int(raw), (0...65535).contains(port) else {
                throw ConfigurationError("BFF_ADMIN_PORT", "must be a port (0-65535; 0 picks a free one) or off, got \"\(raw)\"")
            }
            self.port = port
            host = reader.optional("BFF_ADMIN_HOST") ?? reader.string("BFF_HTTP_HOST", default: "127.0.0.1")
        }
    }

    /// What `/readyz` checks: the process's database and schema (the worker's jobs need nothing else).
    public typealias Readiness = @Sendable () async -> Result<Int, APIError>

    /// The listener as a service of its process's group. `onBound` receives the port it listens on.
    package static func application(
        _ configuration: Configuration, readiness: @escaping Readiness, logger: Logger,
        onBound: @escaping @Sendable (Int) -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        router.get("metrics") { _, _ -> Response in
            ProcessMetrics.sample()
            var buffer: [UInt8] = []
            buffer.reserveCapacity(16 * 1024)
            Observability.registry.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        router.get("healthz") { _, _ -> Response in
            json(.ok, #"{"status":"ok","version":"\#(BuildInfo.version)"}"#)
        }
        router.get("readyz") { _, _ -> Response in
            switch await readiness() {
            case .success(let version): json(.ok, #"{"status":"ready","schema_version":\#(version)}"#)
            case .failure(let error): error.response(in: .default)
            }
        }
        let listenerLogger = {
            var logger = logger
            logger[metadataKey: "component"] = "admin"
            return logger
        }()
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                listenerLogger.info(
                    "admin listener started", metadata: ["address": .string("\(configuration.host):\(port)"), "paths": "/metrics /healthz /readyz"])
                onBound(port)
            },
            logger: listenerLogger)
    }

    private static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
