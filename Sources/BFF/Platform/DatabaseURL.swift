import Foundation
import NIOSSL
import PostgresNIO

/// A parsed `BFF_DATABASE_URL`: `postgres://user:pass@host:port/db[?sslmode=…]` over TCP, or
/// `postgres://user@/db?host=/socket/dir` (libpq style) over a Unix socket.
public struct DatabaseURL: Sendable, Equatable {
    public enum TLSMode: String, Sendable { case disable, prefer, require }

    public var username: String
    public var password: String?
    public var host: String
    public var port: Int
    public var database: String
    /// Set when `host` names a socket directory rather than a network host.
    public var socketDirectory: String?
    public var tls: TLSMode

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
        guard let mode = TLSMode(rawValue: query["sslmode"] ?? (socketDirectory == nil ? "prefer" : "disable")) else {
            throw ConfigurationError(variable, "has an unsupported sslmode (use disable, prefer or require)")
        }
        tls = mode
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
            let tlsConfiguration: PostgresClient.Configuration.TLS = switch tls {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
            configuration = .init(
                host: host, port: port, username: username, password: password, database: database,
                tls: tlsConfiguration)
        }
        configuration.options.maximumConnections = poolSize
        configuration.options.connectTimeout = .seconds(3)
        // Every statement filters by a user id through an index, so one plan fits all values. PostgreSQL
        // otherwise keeps re-planning a prepared statement whose generic plan it estimates worse than its
        // custom ones: the batched first pages (`unnest` of an array) were planned on every execution.
        configuration.options.additionalStartupParameters.append(("plan_cache_mode", "force_generic_plan"))
        return configuration
    }
}
