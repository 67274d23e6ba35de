import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PostgresNIO
@testable import BFF

/// A fresh database per suite, cloned from one migrated template (cloning is far faster than migrating).
actor TestDatabases {
    static let shared = TestDatabases()

    private var template: String?
    private var counter = 0
    private var sweptLeftovers = false

    /// Creates an empty database (no migrations) and returns its URL.
    func makeEmpty(prefix: String = "bff_empty") async throws -> DatabaseURL {
        let base = try TestEnvironment.databaseURL
        try await dropLeftovers(base)
        counter += 1
        let name = "\(prefix)_\(ProcessInfo.processInfo.processIdentifier)_\(counter)"
        try await Self.admin(base) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        return base.with(database: name)
    }

    /// Creates a database holding the current schema.
    func makeMigrated() async throws -> DatabaseURL {
        let base = try TestEnvironment.databaseURL
        let template = try await migratedTemplate()
        counter += 1
        let name = "bff_suite_\(ProcessInfo.processInfo.processIdentifier)_\(counter)"
        try await Self.admin(base) { client in
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE \(template)"))
        }
        return base.with(database: name)
    }

    private func migratedTemplate() async throws -> String {
        if let template { return template }
        let url = try await makeEmpty(prefix: "bff_template")
        let migrator = Migrator(
            migrations: try Migration.load(from: TestEnvironment.migrationsDirectory), logger: TestEnvironment.quietLogger)
        _ = try await url.withClient(poolSize: 2) { client in try await migrator.migrate(client: client) }
        template = url.database
        return url.database
    }

    /// Drops, once per run, the databases of earlier runs whose process has ended. A suite has no
    /// asynchronous teardown, so each run leaves its databases behind; on a developer's long-lived
    /// cluster they added up to 6,545 databases and 53 GB, and filled the disk.
    private func dropLeftovers(_ base: DatabaseURL) async throws {
        guard !sweptLeftovers else { return }
        sweptLeftovers = true
        try await Self.admin(base) { client in
            var names: [String] = []
            let rows = try await client.query(
                "SELECT datname::text FROM pg_database WHERE datname ~ '^bff_(suite|empty|template)_[0-9]+_[0-9]+$'")
            for try await name in rows.decode(String.self) { names.append(name) }
            for name in names {
                guard let pid = name.split(separator: "_").dropLast().last.flatMap({ Int32($0) }),
                      pid != ProcessInfo.processInfo.processIdentifier, kill(pid, 0) != 0, errno == ESRCH
                else { continue }
                _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
        }
    }

    /// Runs `body` against the cluster's maintenance database.
    static func admin(_ base: DatabaseURL, _ body: @escaping @Sendable (PostgresClient) async throws -> Void) async throws {
        try await base.with(database: "postgres").withClient(body)
    }
}

extension DatabaseURL {
    /// Runs `body` with a client of its own on this database: a test's set-up and checks, outside the server.
    func withClient<Result: Sendable>(
        poolSize: Int = 1, _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        try await Commands.withDatabase(PostgresClient(configuration: clientConfiguration(poolSize: poolSize)), body)
    }
}
