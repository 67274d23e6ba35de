import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// The process's one client for the push services: the system's roots plus `BFF_OUTBOUND_CA_FILE`
/// (tests' local services, an operator's TLS-inspecting proxy), HTTP/2 where the service offers it
/// (APNs requires it), no redirects (a push is never re-sent elsewhere), bounded connects.
enum OutboundHTTP {
    /// One client per CA file for the life of the process (a client must be shut down before it is
    /// released, and a process's services share it until exit).
    private static let clients = NIOLockedValueBox<[String: HTTPClient]>([:])

    static func client(extraCAFile: String?) throws -> HTTPClient {
        try clients.withLockedValue { clients in
            if let client = clients[extraCAFile ?? ""] { return client }
            let client = try makeClient(extraCAFile: extraCAFile)
            clients[extraCAFile ?? ""] = client
            return client
        }
    }

    private static func makeClient(extraCAFile: String?) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let extraCAFile {
            tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(extraCAFile))]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(15)))
        configuration.httpVersion = .automatic
        configuration.connectionPool = .init(idleTimeout: .seconds(60))
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }
}
