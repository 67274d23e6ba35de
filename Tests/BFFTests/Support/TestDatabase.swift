import Foundation
import Logging
import PostgresNIO

@testable import BFF
@testable import BFFPlatform

#if canImport(Glibc)
import Glibc
#endif

/// A fresh database per suite, cloned from one migrated template (cloning is far faster than migrating).
actor TestDatabases {
    static let shared = TestDatabases()

    private var template: String?
    private var counter = 0
    /// Every caller waits for it: the actor is re-entered while it runs, and a database made
    /// meanwhile would carry this process's pid and be taken for a leftover.
    private var sweep: Task<Void, any Error>?

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
        try await dropLeftovers(base)
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
        let migrator = try Migrator(directory: TestEnvironment.migrationsDirectory, logger: TestEnvironment.quietLogger)
        _ = try await url.withClient(poolSize: 2) { client in try await migrator.migrate(client: client) }
        template = url.database
        return url.database
    }

    /// Drops, before this run makes its first database, those of earlier runs whose process has
    /// ended. A suite has no asynchronous teardown, so each run leaves its databases behind; on a
    /// developer's long-lived cluster they added up to 6,545 databases and 53 GB, and filled the
    /// disk. Names carry the pid: one of this process's own is an earlier run's that had the same
    /// pid (containers reuse them), since this run has made none yet. A run on another host that
    /// shares the cluster is not told apart; at most 300 go per run (each DROP is a checkpoint),
    /// and one that cannot be dropped is left for later.
    private func dropLeftovers(_ base: DatabaseURL) async throws {
        if sweep == nil { sweep = Task { try await Self.dropLeftovers(base) } }
        try await sweep?.value
    }

    private static func dropLeftovers(_ base: DatabaseURL) async throws {
        try await admin(base) { client in
            var names: [String] = []
            let rows = try await client.query(
                "SELECT datname::text FROM pg_database WHERE datname ~ '^bff_(suite|empty|template)_[0-9]+_[0-9]+$' LIMIT 300")
            for try await name in rows.decode(String.self) { names.append(name) }
            let own = ProcessInfo.processInfo.processIdentifier
            for name in names {
                guard let pid = name.split(separator: "_").dropLast().last.flatMap({ Int32($0) }),
                    pid == own || (kill(pid, 0) != 0 && errno == ESRCH)
                else { continue }
                _ = try? await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
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

extension ChatStore {
    /// A repository with a first-page batcher of its own, for a test that runs no server.
    static func withOwnBatcher(_ database: Database) -> ChatStore {
        ChatStore(database: database, firstPages: FirstPageBatcher(database: database))
    }
}

extension PostgresConnection {
    /// Waits, at most 10 s, until another session waits for a lock on `table` (PostgreSQL shows it
    /// ungranted): a condition to await instead of a sleep. Whether one did.
    func awaitLockWaiter(on table: String) async throws -> Bool {
        for _ in 0..<500 {
            let rows = try await query(
                "SELECT count(*)::int FROM pg_locks WHERE relation = \(table)::regclass AND NOT granted", logger: TestEnvironment.quietLogger)
            for try await count in rows.decode(Int.self) where count > 0 { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}
