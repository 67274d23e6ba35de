import AsyncHTTPClient
import Foundation
import HummingbirdTesting
import NIOSSL
import Testing

@testable import BFF
@testable import BFFPlatform

/// The server terminating TLS itself (`BFF_TLS_CERT`, `BFF_TLS_KEY`), with a self-signed certificate.
@Suite("Server TLS", .needsDatabase, .timeLimit(.minutes(3)))
struct ServerTLSTests {
    let database: DatabaseURL
    let directory: String

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("bff-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        _ = try DatabaseTLSTests.selfSignedCertificate(into: directory)
    }

    @Test("the server speaks TLS 1.3 only, and its answers carry HSTS")
    func tls13WithHSTS() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try await makeTestApp(
            database: database, environment: ["BFF_TLS_CERT": "\(directory)/server.crt", "BFF_TLS_KEY": "\(directory)/server.key"])
        try await app.live(.ahc(.https)) { client in
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
            #expect(health.headers[.strictTransportSecurity]?.hasPrefix("max-age=") == true)

            let port = try #require(client.port)
            var tls12 = TLSConfiguration.makeClientConfiguration()
            tls12.certificateVerification = .none
            tls12.maximumTLSVersion = .tlsv12
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls12)
            // The refusal at once, rather than retried until the deadline.
            configuration.connectionPool.retryConnectionEstablishment = false
            let old = HTTPClient(configuration: configuration)
            let refusal = await #expect(throws: (any Error).self) {
                _ = try await old.execute(HTTPClientRequest(url: "https://127.0.0.1:\(port)/healthz"), timeout: .seconds(5))
            }
            // A handshake refused for its version, not a timeout or a refused connection.
            #expect(refusal is NIOSSLError, "\(String(describing: refusal))")
            try await old.shutdown()
        }
    }

    @Test(
        "a TLS file that is missing or not PEM stops start-up with an error naming its variable and path",
        arguments: [("BFF_TLS_CERT", "missing"), ("BFF_TLS_CERT", "key as certificate"), ("BFF_TLS_KEY", "certificate as key")])
    func unreadableFiles(_ variable: String, _ problem: String) async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var certificate = "\(directory)/server.crt", key = "\(directory)/server.key"
        switch problem {
        case "missing": certificate = "\(directory)/absent.crt"
        case "key as certificate": certificate = key
        default: key = certificate
        }
        do {
            _ = try await makeTestApp(database: database, environment: ["BFF_TLS_CERT": certificate, "BFF_TLS_KEY": key])
            Issue.record("the application was built")
        } catch let error as ConfigurationError {
            #expect(error.variable == variable)
            #expect(error.problem.contains(variable == "BFF_TLS_CERT" ? certificate : key), "\(error)")
        }
    }
}
