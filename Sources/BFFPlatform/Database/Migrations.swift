import Crypto
import Foundation
import Logging
import PostgresNIO

/// One numbered SQL file of `migrations/` (`NNNN_name.sql`).
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String
    /// SHA-256 of the file, hex: an applied file that changes afterwards is refused.
    public let checksum: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = Self.checksum(of: sql)
    }

    static func checksum(of sql: String) -> String {
        SHA256.hash(data: Data(sql.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Reads every `NNNN_name.sql` of `directory`, ordered by version.
    public static func load(from directory: String) throws -> [Migration] {
        let url = URL(fileURLWithPath: directory, isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.path) else {
            throw MigrationError.directoryMissing(directory)
        }
        var migrations: [Migration] = []
        for file in names where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            let parts = stem.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 4, let version = Int(parts[0]) else {
                throw MigrationError.badFileName(file)
            }
            let sql = try String(contentsOf: url.appendingPathComponent(file), encoding: .utf8)
            migrations.append(Migration(version: version, name: String(parts[1]), sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (previous, next) in zip(migrations, migrations.dropFirst()) where previous.version == next.version {
            throw MigrationError.duplicateVersion(next.version)
        }
        return migrations
    }
}

/// One file of `migrations/functions/` (`name.sql`): the current definition of one stored
/// function, as `CREATE OR REPLACE FUNCTION`. Unlike a numbered migration it is edited in place, so
/// it is the one full text of the function; `bff migrate` applies it, after the numbered files,
/// whenever it differs from what the database last applied. A change of the function's arguments or
/// result columns needs a numbered migration that drops the old signature first (see README).
public struct StoredFunction: Sendable, Equatable {
    public let name: String
    public let sql: String
    public let checksum: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
        self.checksum = Migration.checksum(of: sql)
    }

    /// Every `name.sql` of `directory/functions`, by name; none when there is no such folder.
    public static func load(from directory: String) throws -> [StoredFunction] {
        let url = URL(fileURLWithPath: directory, isDirectory: true).appendingPathComponent("functions", isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.path) else { return [] }
        return try names.filter { $0.hasSuffix(".sql") }.sorted().map { file in
            StoredFunction(name: String(file.dropLast(4)), sql: try String(contentsOf: url.appendingPathComponent(file), encoding: .utf8))
        }
    }
}

public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case directoryMissing(String)
    case badFileName(String)
    case duplicateVersion(Int)
    case checksumMismatch(version: Int, name: String)
    case failed(version: Int, name: String, reason: String)
    case schemaBehind(current: Int, latest: Int)
    case versionsMissing([Int])
    case functionFailed(name: String, reason: String)
    case functionsBehind([String])

    public var description: String {
        switch self {
        case .directoryMissing(let directory):
            "migrations directory \(directory) does not exist (set BFF_MIGRATIONS_DIR)"
        case .badFileName(let file):
            "migration file \(file) is not named NNNN_name.sql"
        case .duplicateVersion(let version):
            "two migration files share version \(version)"
        case .checksumMismatch(let version, let name):
            "applied migration \(version)_\(name) was changed after it was applied; restore it and add a new migration instead"
        case .failed(let version, let name, let reason):
            "migration \(version)_\(name) failed and was rolled back: \(reason)"
        case .schemaBehind(let current, let latest):
            "the database schema is at version \(current) but this build needs \(latest): run `bff migrate` first"
        case .versionsMissing(let versions):
            "the database lacks migrations \(versions.map(String.init).joined(separator: ", ")), older than its newest: run `bff migrate` first"
        case .functionFailed(let name, let reason):
            "stored function file functions/\(name).sql failed and was rolled back: \(reason)"
        case .functionsBehind(let names):
            "the database's stored functions \(names.joined(separator: ", ")) differ from this build's migrations/functions: run `bff migrate` first"
        }
    }
}

/// Applies pending migrations under a PostgreSQL advisory lock, so replicas starting together migrate once.
public struct Migrator: Sendable {
    /// Arbitrary, fixed: the advisory lock every `bff migrate` of this schema takes.
    static let lockKey: Int64 = 0x0BFF_0001
    public let migrations: [Migration]
    public let functions: [StoredFunction]
    let logger: Logger
    /// How long a migration's statement waits for a table lock (a file may set its own with
    /// `SET LOCAL lock_timeout`). Requests on that table queue behind the waiting statement, so
    /// this stays below the servers' deadline (`BFF_DATABASE_TIMEOUT`, 5 s by default): they are
    /// slow meanwhile, not failed.
    let lockTimeout: Duration
    /// The pauses before each new attempt of a migration that waited too long; then it fails.
    let lockRetryDelays: [Duration]

    public init(
        migrations: [Migration], functions: [StoredFunction] = [], logger: Logger, lockTimeout: Duration = .seconds(3),
        lockRetryDelays: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8)]
    ) {
        self.migrations = migrations
        self.functions = functions
        self.logger = logger
        self.lockTimeout = lockTimeout
        self.lockRetryDelays = lockRetryDelays
    }

    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// The migrations and stored functions of `directory` (`BFF_MIGRATIONS_DIR`).
    public init(directory: String, logger: Logger) throws {
        self.init(migrations: try Migration.load(from: directory), functions: try StoredFunction.load(from: directory), logger: logger)
    }

    /// Applies what is pending, each file in its own transaction, then the stored functions that
    /// differ from what was last applied; returns the versions it applied.
    @discardableResult
    public func migrate(client: PostgresClient) async throws -> [Int] {
        try await client.withConnection { connection in
            // A migration may build an index over a large table, and the lock may be another replica's
            // while it migrates: the server's pools end statements at `BFF_DATABASE_TIMEOUT`, this
            // session does not while it migrates.
            _ = try await connection.query("SET statement_timeout = 0", logger: logger)
            _ = try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger).collect()
            do {
                let applied = try await apply(on: connection)
                _ = try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger).collect()
                _ = try await connection.query("RESET statement_timeout", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                _ = try? await connection.query("RESET statement_timeout", logger: logger)
                throw error
            }
        }
    }

    /// The highest applied version, after checking the applied files' checksums; 0 on an empty database.
    public func currentVersion(client: PostgresClient) async throws -> Int {
        try await checkedApplied(client: client).keys.max() ?? 0
    }

    /// Refuses a database that is behind this build's newest migration, or lacks an older one (a
    /// file merged after a newer one was applied).
    public func requireCurrent(client: PostgresClient) async throws {
        let applied = try await checkedApplied(client: client)
        let current = applied.keys.max() ?? 0
        if current < latestVersion { throw MigrationError.schemaBehind(current: current, latest: latestVersion) }
        let missing = migrations.map(\.version).filter { applied[$0] == nil }
        if !missing.isEmpty { throw MigrationError.versionsMissing(missing) }
        guard !functions.isEmpty else { return }
        let recorded = try await client.withConnection { connection in
            try await functionBookkeepingExists(on: connection) ? try await functionChecksums(on: connection) : [:]
        }
        let behind = functions.filter { recorded[$0.name] != $0.checksum }.map(\.name)
        if !behind.isEmpty { throw MigrationError.functionsBehind(behind) }
    }

    /// The applied versions' checksums, after checking them against the files.
    private func checkedApplied(client: PostgresClient) async throws -> [Int: String] {
        let applied = try await client.withConnection { connection in
            try await bookkeepingExists(on: connection) ? try await appliedChecksums(on: connection) : [:]
        }
        try verify(applied)
        return applied
    }

    private func apply(on connection: PostgresConnection) async throws -> [Int] {
        _ = try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        let applied = try await appliedChecksums(on: connection)
        try verify(applied)
        // The extended protocol takes one statement at a time; PL/pgSQL's EXECUTE runs a whole file
        // passed as a bound parameter, so nothing is spliced into SQL text.
        _ = try await connection.query(
            """
            CREATE OR REPLACE FUNCTION pg_temp.bff_run_migration(script text) RETURNS void
            LANGUAGE plpgsql AS $$ BEGIN EXECUTE script; END $$
            """, logger: logger)
        var newlyApplied: [Int] = []
        let newestApplied = applied.keys.max() ?? 0
        for migration in migrations where applied[migration.version] == nil {
            logger.info("applying migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            if migration.version < newestApplied {
                logger.warning(
                    "applying a migration older than the newest applied one: it was added after that one ran",
                    metadata: [
                        "version": "\(migration.version)", "newest_applied": "\(newestApplied)",
                    ])
            }
            try await runInTransaction(
                migration.sql,
                recording: "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))",
                on: connection, what: ["version": "\(migration.version)"]
            ) { MigrationError.failed(version: migration.version, name: migration.name, reason: $0) }
            newlyApplied.append(migration.version)
        }
        try await applyFunctions(on: connection)
        return newlyApplied
    }

    /// The stored functions whose file differs from what was last applied, each in its own
    /// transaction (`CREATE OR REPLACE`: the function is replaced under the callers' feet, atomically).
    private func applyFunctions(on connection: PostgresConnection) async throws {
        guard !functions.isEmpty else { return }
        _ = try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_functions (
                name text PRIMARY KEY,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        let recorded = try await functionChecksums(on: connection)
        for function in functions where recorded[function.name] != function.checksum {
            logger.info("applying stored function", metadata: ["function": "\(function.name)"])
            try await runInTransaction(
                function.sql,
                recording: """
                    INSERT INTO schema_functions (name, checksum) VALUES (\(function.name), \(function.checksum))
                    ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
                    """,
                on: connection, what: ["function": "\(function.name)"]
            ) { MigrationError.functionFailed(name: function.name, reason: $0) }
        }
    }

    /// Runs `script` and the bookkeeping statement in one transaction under the lock timeout, trying
    /// again after `lockRetryDelays` when a table's lock was not granted in time.
    private func runInTransaction(
        _ script: String, recording bookkeeping: PostgresQuery, on connection: PostgresConnection,
        what: Logger.Metadata, failure: (String) -> MigrationError
    ) async throws {
        for attempt in 0... {
            do {
                _ = try await connection.query("BEGIN", logger: logger)
                // A statement queued for a table's lock behind a long query (a backup, an open
                // transaction) queues every request on that table behind itself: better to give
                // up and try again. For this transaction only; a file may set its own.
                let wait = "\(Int(lockTimeout.seconds * 1000))ms"
                _ = try await connection.query("SELECT set_config('lock_timeout', \(wait), true)", logger: logger).collect()
                // Read to the end: an error after the row description (any error the file raises)
                // reaches the caller only through the rows.
                _ = try await connection.query("SELECT pg_temp.bff_run_migration(\(script))", logger: logger).collect()
                _ = try await connection.query(bookkeeping, logger: logger)
                _ = try await connection.query("COMMIT", logger: logger)
                break
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                // A lock held by a short transaction is usually gone a moment later.
                if (error as? PSQLError)?.serverInfo?[.sqlState] == "55P03", attempt < lockRetryDelays.count {
                    logger.warning(
                        "migration waited too long for a lock; trying again",
                        metadata: what.merging([
                            "retry_in_seconds": "\(lockRetryDelays[attempt].seconds)"
                        ]) { $1 })
                    try await Task.sleep(for: lockRetryDelays[attempt])
                    continue
                }
                throw failure(reason(error))
            }
        }
    }

    private func verify(_ applied: [Int: String]) throws {
        for migration in migrations {
            if let checksum = applied[migration.version], checksum != migration.checksum {
                throw MigrationError.checksumMismatch(version: migration.version, name: migration.name)
            }
        }
    }

    private func bookkeepingExists(on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
        for try await exists in rows.decode(Bool.self) { return exists }
        return false
    }

    private func functionBookkeepingExists(on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT to_regclass('schema_functions') IS NOT NULL", logger: logger)
        for try await exists in rows.decode(Bool.self) { return exists }
        return false
    }

    private func functionChecksums(on connection: PostgresConnection) async throws -> [String: String] {
        let rows = try await connection.query("SELECT name, checksum FROM schema_functions", logger: logger)
        var recorded: [String: String] = [:]
        for try await (name, checksum) in rows.decode((String, String).self) { recorded[name] = checksum }
        return recorded
    }

    private func appliedChecksums(on connection: PostgresConnection) async throws -> [Int: String] {
        let rows = try await connection.query("SELECT version, checksum FROM schema_migrations", logger: logger)
        var applied: [Int: String] = [:]
        for try await (version, checksum) in rows.decode((Int, String).self) { applied[version] = checksum }
        return applied
    }

    private func reason(_ error: any Error) -> String {
        if let error = error as? PSQLError, let message = error.serverInfo?[.message] {
            if error.serverInfo?[.sqlState] == "55P03" {
                return "\(message): another session held a table it needs for over \(Int(lockTimeout.seconds)) s, \(lockRetryDelays.count + 1) times; run it again once that session is done"
            }
            return message
        }
        return String(describing: error)
    }
}
