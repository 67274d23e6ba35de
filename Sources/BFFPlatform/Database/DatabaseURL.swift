import Foundation
import NIOSSL
import PostgresNIO

/// A parsed `BFF_DATABASE_URL`: `postgres://user:pass@host:port/db[?sslmode=…&sslrootcert=…]` over
/// TCP, or `postgres://user@/db?host=/socket/dir` (libpq style) over a Unix socket.
public struct DatabaseURL: Sendable, Equatable {
    /// libpq's `sslmode`s but `allow`: `prefer` and `require` encrypt without checking the server's
    /// certificate, `verify-ca` checks its chain, `verify-full` its chain and host name.
    public enum TLSMode: String, Sendable { case disable, prefer, require, verifyCA = "verify-ca", verifyFull = "verify-full" }

    public var username: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    /// Set when `host` names a socket directory rather than a network host.
    public var socketDirectory: String?
    public var tls: TLSMode
    /// `sslrootcert`: a PEM file of the certificate authorities to trust, or `system` for the
    /// system's (which `verify-full` also uses when it is unset).
    public var rootCertificates: String?

    public init(parsing string: String, variable: String = "BFF_DATABASE_URL") throws {
        guard let components = URLComponents(string: string),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else { throw ConfigurationError(variable, "must be a postgres:// URL") }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        username = components.percentEncodedUser.flatMap { $0.removingPercentEncoding } ?? "postgres"
        password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
        port = components.port ?? Int(query["port"] ?? "") ?? 5432
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? username : path
        if let hostParameter = query["host"], hostParameter.hasPrefix("/") {
            socketDirectory = hostParameter
            host = hostParameter
        } else {
            socketDirectory = nil
            host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        }
        rootCertificates = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        let fallback = socketDirectory != nil ? "disable" : rootCertificates == "system" ? "verify-full" : "prefer"
        guard let mode = TLSMode(rawValue: query["sslmode"] ?? fallback) else {
            throw ConfigurationError(variable, "has an unsupported sslmode (use disable, prefer, require, verify-ca or verify-full)")
        }
        tls = mode
        // As libpq: the public authorities vouch for anyone's certificate, so they are only worth
        // trusting together with the host name.
        if rootCertificates == "system", mode != .verifyFull {
            throw ConfigurationError(variable, "has sslrootcert=system, which needs sslmode=verify-full")
        }
        if mode == .verifyCA, rootCertificates == nil {
            throw ConfigurationError(variable, "has sslmode=verify-ca, which needs sslrootcert=/path/to/ca.pem (or use verify-full)")
        }
        if let rootCertificates, rootCertificates != "system", !FileManager.default.isReadableFile(atPath: rootCertificates) {
            throw ConfigurationError(variable, "names an sslrootcert that cannot be read: \(rootCertificates)")
        }
    }

    /// Where it points, without the password: for messages to an operator.
    public var location: String {
        "\(username)@\(socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } ?? "\(host):\(port)")/\(database)"
    }

    /// The same server with another database, for tests and tools that create databases.
    public func with(database: String) -> DatabaseURL {
        var copy = self
        copy.database = database
        return copy
    }

    public func clientConfiguration(poolSize: Int = 20) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = .init(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)",
                username: username, password: password, database: database)
        } else {
            let tls: PostgresClient.Configuration.TLS =
                switch encryption {
                case (let configuration, required: false)?: .prefer(configuration)
                case (let configuration, required: true)?: .require(configuration)
                case nil: .disable
                }
            configuration = .init(
                host: host, port: port, username: username, password: password, database: database,
                tls: tls)
        }
        configuration.options.maximumConnections = poolSize
        configuration.options.connectTimeout = .seconds(3)
        // Every statement filters by a user id through an index, so one plan fits all values. PostgreSQL
        // otherwise keeps re-planning a prepared statement whose generic plan it estimates worse than its
        // custom ones: the batched first pages (`unnest` of an array) were planned on every execution.
        configuration.options.additionalStartupParameters.append(("plan_cache_mode", "force_generic_plan"))
        return configuration
    }

    /// One connection of its own, outside the pools: the job workers' LISTEN.
    package func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if let socketDirectory {
            return .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: username, password: password, database: database)
        }
        let tls: PostgresConnection.Configuration.TLS =
            switch encryption {
            case (let configuration, required: false)?: .prefer(try NIOSSLContext(configuration: configuration))
            case (let configuration, required: true)?: .require(try NIOSSLContext(configuration: configuration))
            case nil: .disable
            }
        return .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
    }

    /// How the connection is encrypted and the server checked, and whether a server without TLS is
    /// refused (all but `prefer`); nil without TLS. As in libpq, `require` with an `sslrootcert`
    /// checks the chain as `verify-ca` does.
    var encryption: (configuration: TLSConfiguration, required: Bool)? {
        guard tls != .disable else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificates, rootCertificates != "system" {
            configuration.trustRoots = .file(rootCertificates)
        }
        configuration.certificateVerification =
            switch tls {
            case .disable, .prefer: .none
            case .require: rootCertificates == nil ? .none : .noHostnameVerification
            case .verifyCA: .noHostnameVerification
            case .verifyFull: .fullVerification
            }
        return (configuration, tls != .prefer)
    }
}
