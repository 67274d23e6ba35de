import Foundation
import Logging
import PostgresNIO
@testable import BFF

/// A fresh database per suite, cloned from one migrated template (cloning is far faster than migrating).
actor TestDatabases {
    static let shared = TestDatabases()

    private var template: String?
    private var counter = 0

    /// Creates an empty database (no migrations) and returns its URL.
    func makeEmpty(prefix: String = "bff_empty") async throws -> DatabaseURL {
        let base = try TestEnvironment.databaseURL
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
