import BFFWire
import Foundation
import Logging
import PostgresNIO

@testable import BFF
@testable import BFFPlatform

/// Settings `scripts/test` hands to the suite.
enum TestEnvironment {
    static let values = ProcessInfo.processInfo.environment

    static var databaseURL: DatabaseURL {
        get throws {
            guard let url = values["BFF_TEST_DATABASE_URL"] else {
                throw TestSetupError("BFF_TEST_DATABASE_URL is not set: run the suite through scripts/test")
            }
            return try DatabaseURL(parsing: url)
        }
    }

    static var migrationsDirectory: String {
        values["BFF_MIGRATIONS_DIR"] ?? repository.appendingPathComponent("migrations").path
    }

    /// The checkout's top folder.
    static var repository: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static let jwtKeys =
        "k2:" + Base64URL.encode([UInt8](repeating: 7, count: 32))
        + ",k1:" + Base64URL.encode([UInt8](repeating: 9, count: 32))

    /// A complete server environment for `database`; `overrides` wins.
    static func serverEnvironment(database: DatabaseURL, _ overrides: [String: String] = [:]) -> [String: String] {
        var env: [String: String] = [
            "BFF_DATABASE_URL": database.urlString,
            "BFF_HTTP_PORT": "0",
            "BFF_JWT_KEYS": jwtKeys,
            "BFF_OIDC_ISSUER": values["BFF_TEST_OIDC_ISSUER"] ?? "http://127.0.0.1:54330",
            "BFF_OIDC_CLIENT_ID": "bff-tests",
            "BFF_OIDC_REDIRECT_URIS": "com.example.app:/oauth/callback",
            "BFF_CORS_ORIGINS": "https://app.example.com",
            "BFF_MIGRATIONS_DIR": migrationsDirectory,
            // A suite that reads the admin listener asks for one (`0`, a free port).
            "BFF_ADMIN_PORT": "off",
            "BFF_LOG_LEVEL": "info",
            "BFF_DATABASE_TIMEOUT": "3",
            // A server opens its whole pool at start, and the suites' servers share one cluster.
            "BFF_DATABASE_POOL_SIZE": "4",
        ]
        env.merge(overrides) { $1 }
        return env
    }

    static let quietLogger: Logger = {
        var logger = Logger(label: "bff-tests") { _ in SwiftLogNoOpLogHandler() }
        logger.logLevel = .critical
        return logger
    }()
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension DatabaseURL {
    /// Back to the URL form `BFF_DATABASE_URL` takes.
    var urlString: String {
        let credentials = password.map { "\(username):\($0)" } ?? username
        if let socketDirectory {
            return "postgres://\(credentials)@localhost:\(port)/\(database)?host=\(socketDirectory)"
        }
        return "postgres://\(credentials)@\(host):\(port)/\(database)?sslmode=\(tls.rawValue)"
            + (rootCertificates.map { "&sslrootcert=\($0)" } ?? "")
    }
}
