import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import ServiceLifecycle

/// TLS for a stand-in from a PEM certificate chain and key (both push services speak HTTPS only).
public func standInTLS(certificatePath: String, keyPath: String) throws -> TLSConfiguration {
    TLSConfiguration.makeServerConfiguration(
        certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) },
        privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
}

/// Runs `router` over HTTP/2 (and HTTP/1.1) with TLS on 127.0.0.1:`port` (0: a free one) while
/// `body` runs, and hands `body` its base URL, `https://localhost:PORT`. With `streams`, every
/// request is counted there under its connection (how many a client sends at once on one).
public func serveStandIn<T: Sendable>(
    _ router: Router<BasicRequestContext>, tls: TLSConfiguration, port: Int = 0, streams: StreamCounts? = nil, logger: Logger,
    _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    let server: HTTPServerBuilder
    if let streams {
        // Hummingbird adds these handlers to each HTTP/2 stream's channel (and to an HTTP/1.1
        // connection's), a new one per channel.
        let configuration = HTTP2ChannelConfiguration(streamConfiguration: HTTP1Channel.Configuration(additionalChannelHandlers: [streams.handler()]))
        server = try .http2Upgrade(tlsConfiguration: tls, configuration: configuration)
    } else {
        server = try .http2Upgrade(tlsConfiguration: tls)
    }
    return try await serve(router, server: server, base: { "https://localhost:\($0)" }, port: port, logger: logger, body)
}

/// Runs `router` over plain HTTP/1.1 on 127.0.0.1:`port` (0: a free one) while `body` runs, and
/// hands `body` its base URL, `http://127.0.0.1:PORT` (the LLM and RevenueCat stand-ins: the server
/// allows plain http for localhost).
public func serveHTTP1<T: Sendable>(
    _ router: Router<BasicRequestContext>, port: Int = 0, logger: Logger, _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    try await serve(router, server: .http1(), base: { "http://127.0.0.1:\($0)" }, port: port, logger: logger, body)
}

private func serve<T: Sendable>(
    _ router: Router<BasicRequestContext>, server: HTTPServerBuilder, base: @escaping @Sendable (Int) -> String, port: Int, logger: Logger,
    _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    let bound = NIOLockedValueBox(0)
    let started = AsyncStream<Void>.makeStream()
    let app = Application(
        router: router, server: server,
        configuration: .init(address: .hostname("127.0.0.1", port: port)),
        onServerRunning: { channel in
            bound.withLockedValue { $0 = channel.localAddress?.port ?? 0 }
            started.continuation.yield()
        },
        logger: logger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        let services = ServiceGroup(services: [app], logger: logger)
        group.addTask {
            try await services.run()
            return nil
        }
        for await _ in started.stream { break }
        defer { Task { await services.triggerGracefulShutdown() } }
        let result = try await body(base(bound.withLockedValue { $0 }))
        await services.triggerGracefulShutdown()
        return result
    }
}
