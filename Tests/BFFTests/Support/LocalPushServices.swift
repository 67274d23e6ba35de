import Foundation
import Hummingbird
import NIOSSL
import StandIns

@testable import BFF
@testable import BFFPlatform

/// A TLS certificate for `localhost`, and the CA file a client must be given to trust it.
struct LocalTLS: Sendable {
    let directory: String
    let certificatePath: String
    let keyPath: String

    static func make() throws -> LocalTLS {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bff-push-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = try DatabaseTLSTests.selfSignedCertificate(into: directory)
        return LocalTLS(directory: directory, certificatePath: certificate, keyPath: "\(directory)/server.key")
    }
}

/// Runs a stand-in's `router` over HTTP/2 with TLS on a free port while `body` runs; returns its base URL to `body`.
func serveLocally<T: Sendable>(
    _ router: Router<BasicRequestContext>, tls: LocalTLS, _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    try await serveStandIn(
        router, tls: try standInTLS(certificatePath: tls.certificatePath, keyPath: tls.keyPath), logger: TestEnvironment.quietLogger, body)
}

extension PushOutcome {
    /// The outcome's kind, with a retry's `Retry-After`, for tests' tables of answers.
    var kind: String {
        switch self {
        case .sent: "sent"
        case .tokenDead: "tokenDead"
        case .retry(_, let after?): "retry after \(after.components.seconds)"
        case .retry: "retry"
        case .configurationError: "configurationError"
        case .payloadError: "payloadError"
        }
    }
}
