import Foundation
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Migrations", .needsDatabase, .timeLimit(.minutes(3)))
struct MigrationTests {
    let migrations: [Migration]

    init() throws {
        migrations = try Migration.load(from: TestEnvironment.migrationsDirectory)
    }

    private func migrator(_ migrations: [Migration]) -> Migrator {
        Migrator(migrations: migrations, logger: TestEnvironment.quietLogger)
    }

    @Test("files are numbered, ordered and each applies on an empty database; a second run applies nothing")
    func appliesOnEmptyDatabaseOnce() async throws {
        #expect(migrations.count >= 5)
        #expect(migrations.map(\.version) == migrations.map(\.version).sorted())
        let url = try await TestDatabases.shared.makeEmpty()
        let (first, second, current) = try await url.withClient(poolSize: 2) { [migrations] client in
            let migrator = Migrator(migrations: migrations, logger: TestEnvironment.quietLogger)
            let first = try await migrator.migrate(client: client)
            let second = try await migrator.migrate(client: client)
            return (first, second, try await migrator.currentVersion(client: client))
        }
        #expect(first == migrations.map(\.version))
        #expect(second.isEmpty)
        #expect(current == migrations.last?.version)
    }

    @Test("a command's pools are running before its body leases: postgres-nio logs no early-lease warning")
    func commandBodyLeasesAfterRun() async throws {
        let url = try TestEnvironment.databaseURL
        let logs = LogCapture()
        for _ in 0..<20 {
            let client = PostgresClient(
                configuration: url.clientConfiguration(poolSize: 1),
                backgroundLogger: makeLogger(level: .warning, sink: logs.sink))
            let rows = try await Commands.withDatabase(client) { client in
                try await client.query("SELECT 1").collect().count
            }
            #expect(rows == 1)
        }
        #expect(logs.all.isEmpty, "\(logs.all.first ?? "")")
    }

    @Test("0011 gives the tags of chats evaluated before it the mastery they had before the evaluation")
    func evaluationBaselineBackfill() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let baselines = try await url.withClient(poolSize: 2) { [migrations] client in
            _ = try await Migrator(migrations: migrations.filter { $0.version < 11 }, logger: TestEnvironment.quietLogger)
                .migrate(client: client)
            let user = UUID(), evaluated = UUID(), open = UUID()
            _ = try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.example', 'subject-1')")
            _ = try await client.query("INSERT INTO chats (id, user_id, title) VALUES (\(evaluated), \(user), 'e'), (\(open), \(user), 'o')")
            // Evaluated with score 5 from 0.2: 0.2 + 0.5 * (1 - 0.2) = 0.6.
            _ = try await client.query(
                """
                INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery)
                SELECT c.id, (SELECT id FROM tags ORDER BY code LIMIT 1), \(user), CASE WHEN c.id = \(evaluated) THEN 0.6 ELSE 0.3 END
                FROM chats c WHERE c.user_id = \(user)
                """)
            _ = try await client.query("INSERT INTO chat_evaluations (chat_id, user_id, score) VALUES (\(evaluated), \(user), 5)")
            _ = try await Migrator(migrations: migrations, logger: TestEnvironment.quietLogger).migrate(client: client)
            var baselines: [UUID: Double?] = [:]
            for try await (chat, baseline) in try await client.query(
                "SELECT chat_id, mastery_before_evaluation FROM chat_tags WHERE user_id = \(user)"
            ).decode((UUID, Double?).self) {
                baselines[chat] = baseline
            }
            return (baselines[evaluated] ?? nil, baselines[open] ?? nil)
        }
        #expect(abs((baselines.0 ?? -1) - 0.2) < 1e-9)
        #expect(baselines.1 == nil)
    }

    @Test("0031 gives the subscriptions before it their store from their platform; a web purchase or a grant has no platform, and a platform must be its store's")
    func storeOfEveryReceipt() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let (stores, refused) = try await url.withClient(poolSize: 2) { [migrations] client in
            _ = try await Migrator(migrations: migrations.filter { $0.version < 31 }, logger: TestEnvironment.quietLogger).migrate(client: client)
            let user = UUID()
            _ = try await client.query("INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.example', 'subject-1')")
            _ = try await client.query(
                """
                INSERT INTO iap_receipts (receipt_id, user_id, platform, product_id, status, purchase_at, raw_payload_hash)
                VALUES ('ios-1', \(user), 'ios', 'p', 'active', now(), decode(repeat('00', 32), 'hex')),
                       ('android-1', \(user), 'android', 'p', 'active', now(), decode(repeat('00', 32), 'hex'))
                """)
            _ = try await Migrator(migrations: migrations, logger: TestEnvironment.quietLogger).migrate(client: client)
            var stores: [String: String] = [:]
            for try await (id, store) in try await client.query("SELECT receipt_id, store FROM iap_receipts").decode((String, String).self) {
                stores[id] = store
            }
            func insert(_ id: String, store: String?, platform: String?, entitlement: String? = nil) async -> Bool {
                do {
                    _ = try await client.query(
                        """
                        INSERT INTO iap_receipts (receipt_id, user_id, store, platform, product_id, entitlement_id, status, purchase_at, raw_payload_hash)
                        VALUES (\(id), \(user), \(store), \(platform), 'p', \(entitlement), 'active', now(), decode(repeat('00', 32), 'hex'))
                        """)
                    return false
                } catch { return true }
            }
            var refused: [String: Bool] = [:]
            refused["stripe"] = await insert("stripe-1", store: "stripe", platform: nil)
            refused["rc_billing"] = await insert("web-1", store: "rc_billing", platform: nil)
            refused["promotional"] = await insert("promo-1", store: "promotional", platform: nil, entitlement: "pro_access")
            refused["stripe on ios"] = await insert("stripe-2", store: "stripe", platform: "ios")
            refused["app_store without a platform"] = await insert("ios-2", store: "app_store", platform: nil)
            refused["play_store on ios"] = await insert("android-2", store: "play_store", platform: "ios")
            refused["amazon"] = await insert("amazon-1", store: "amazon", platform: nil)
            refused["no store"] = await insert("ios-3", store: nil, platform: "ios")
            return (stores, refused)
        }
        #expect(stores == ["ios-1": "app_store", "android-1": "play_store"])
        #expect(
            refused == [
                "stripe": false, "rc_billing": false, "promotional": false, "stripe on ios": true, "app_store without a platform": true,
                "play_store on ios": true, "amazon": true, "no store": true,
            ])
    }

    @Test("every table of docs/architecture.md#the-data-model exists with the mobile tables' keys and CHECK constraints")
    func schemaHasEveryTable() async throws {
        let url = try await TestDatabases.shared.makeMigrated()
        let (tables, rejected) = try await url.withClient(poolSize: 2) { client in
            var tables: Set<String> = []
            let rows = try await client.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'")
            for try await name in rows.decode(String.self) { tables.insert(name) }
            let user = UUID()
            _ = try await client.query(
                "INSERT INTO users (id, issuer, subject) VALUES (\(user), 'https://idp.example', 'subject-1')")
            var rejected: [String] = []
            let bad: [(String, PostgresQuery)] = [
                ("push_tokens.platform", "INSERT INTO push_tokens (user_id, token, platform, device_id) VALUES (\(user), 'tok', 'windows', 'device-0001')"),
                (
                    "iap_receipts.status",
                    "INSERT INTO iap_receipts (receipt_id, user_id, store, platform, product_id, status, purchase_at, raw_payload_hash) VALUES ('r1', \(user), 'app_store', 'ios', 'p', 'bogus', now(), decode(repeat('00', 32), 'hex'))"
                ),
                ("chats.status", "INSERT INTO chats (user_id, title, status) VALUES (\(user), 't', 'archived')"),
                (
                    "messages.role",
                    "WITH c AS (INSERT INTO chats (user_id, title) VALUES (\(user), 't') RETURNING id, user_id) INSERT INTO messages (chat_id, user_id, role, content) SELECT id, user_id, 'robot', 'x' FROM c"
                ),
            ]
            for (name, query) in bad {
                do { _ = try await client.query(query) } catch { rejected.append(name) }
            }
            return (tables, rejected)
        }
        for table in [
            "users", "subjects", "topics", "tags", "chats", "messages", "chat_tags", "user_settings",
            "user_subject_prefs", "push_tokens", "devices", "iap_receipts", "refresh_tokens",
            "refresh_families", "oidc_logins", "rate_limits", "idempotency_keys", "schema_migrations", "recall_pushes",
            "achievement_progress", "trophy_unlocks", "streak_pushes",
        ] {
            #expect(tables.contains(table), "missing table \(table)")
        }
        #expect(rejected.count == 4, "constraints rejected only \(rejected)")
    }

    @Test("an applied file whose content changed is refused, and nothing more is applied")
    func changedFileIsRefused() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let original = [
            Migration(version: 1, name: "one", sql: "CREATE TABLE one (id int)")
        ]
        let changed = [
            Migration(version: 1, name: "one", sql: "CREATE TABLE one (id bigint)"),
            Migration(version: 2, name: "two", sql: "CREATE TABLE two (id int)"),
        ]
        let (outcome, twoExists) = try await url.withClient(poolSize: 2) { client in
            try await Migrator(migrations: original, logger: TestEnvironment.quietLogger).migrate(client: client)
            var outcome: Result<[Int], MigrationError>
            do {
                outcome = .success(try await Migrator(migrations: changed, logger: TestEnvironment.quietLogger).migrate(client: client))
            } catch let error as MigrationError {
                outcome = .failure(error)
            }
            let rows = try await client.query("SELECT to_regclass('two') IS NOT NULL")
            var exists = true
            for try await value in rows.decode(Bool.self) { exists = value }
            return (outcome, exists)
        }
        #expect(outcome == .failure(.checksumMismatch(version: 1, name: "one")))
        #expect(!twoExists)
    }

    @Test("a failing file is rolled back entirely and reported")
    func failingFileRollsBack() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let broken = [Migration(version: 1, name: "broken", sql: "CREATE TABLE half (id int); SELECT no_such_function();")]
        let (error, halfExists) = try await url.withClient(poolSize: 2) { client in
            var caught: MigrationError?
            do { try await Migrator(migrations: broken, logger: TestEnvironment.quietLogger).migrate(client: client) } catch let error as MigrationError { caught = error }
            let rows = try await client.query("SELECT to_regclass('half') IS NOT NULL")
            var exists = true
            for try await value in rows.decode(Bool.self) { exists = value }
            return (caught, exists)
        }
        guard case .failed(version: 1, name: "broken", let reason) = error else {
            Issue.record("expected a failed migration, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("no_such_function"), "the file's own error: \(reason)")
        #expect(!halfExists)
    }

    @Test("a migration waiting for a table another session holds fails at the lock timeout, tries again, and applies once the table is free")
    func lockTimeoutFailsTheMigration() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let table = [Migration(version: 1, name: "table", sql: "CREATE TABLE held (id int)")]
        let alter = table + [Migration(version: 2, name: "alter", sql: "ALTER TABLE held ADD COLUMN note text")]
        let logger = TestEnvironment.quietLogger
        try await url.withClient(poolSize: 2) { client in
            try await Migrator(migrations: table, logger: logger).migrate(client: client)
            // A long read (a backup, an open transaction) holds the table.
            let (locked, signal) = AsyncStream.makeStream(of: Void.self)
            let reader = Task {
                defer { signal.finish() }
                try await url.withClient { other in
                    try await other.withTransaction(logger: logger) { connection in
                        _ = try await connection.query("SELECT count(*) FROM held", logger: logger)
                        signal.finish()
                        try await Task.sleep(for: .seconds(10))
                    }
                }
            }
            for await _ in locked {}
            let start = ContinuousClock.now
            var caught: MigrationError?
            do {
                try await Migrator(migrations: alter, logger: logger, lockTimeout: .milliseconds(500), lockRetryDelays: [.milliseconds(200)])
                    .migrate(client: client)
            } catch let error as MigrationError { caught = error }
            // Two waits of 0.5 s and a pause of 0.2 s, not the reader's 10 s (a loaded CI machine
            // took 4.8 s for them).
            #expect(ContinuousClock.now - start < .seconds(8))
            if case .failed(version: 2, name: "alter", let reason) = caught {
                #expect(reason.contains("lock timeout") && reason.contains("2 times") && reason.contains("run it again"), "\(reason)")
            } else {
                Issue.record("expected migration 2 to fail, got \(String(describing: caught))")
            }
            // Retried long enough, it applies once the reader is done (10 s after it began).
            let retried = try await Migrator(
                migrations: alter, logger: logger, lockTimeout: .milliseconds(500), lockRetryDelays: Array(repeating: .milliseconds(300), count: 30)
            ).migrate(client: client)
            #expect(retried == [2])
            try await reader.value
        }
    }

    @Test("a migration longer than the server's statement deadline applies through the server's pools, which keep the deadline")
    func migrationOutlastsTheStatementDeadline() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let database = Database(
            configuration: url, perEventLoopOf: .singleton, timeout: .seconds(1), poolSize: 1, logger: TestEnvironment.quietLogger)
        let slow = [Migration(version: 1, name: "slow", sql: "SELECT pg_sleep(1.5); CREATE TABLE slow_done (id int);")]
        let (applied, timeout, sleep) = try await Commands.withDatabase(database) { client in
            let applied = try await Migrator(migrations: slow, logger: TestEnvironment.quietLogger).migrate(client: client)
            // One connection in all (a pool of one): the migrator's own session.
            var timeout = ""
            for try await value in try await client.query("SHOW statement_timeout").decode(String.self) { timeout = value }
            // PostgreSQL itself ends the statement (the deadline alone would wait for it).
            var sleep: String?
            do {
                _ = try await client.query("SELECT pg_sleep(1.5)").collect()
            } catch let error as PSQLError {
                sleep = error.serverInfo?[.sqlState]
            }
            return (applied, timeout, sleep)
        }
        #expect(applied == [1])
        #expect(timeout == "1s")
        #expect(sleep == "57014")
    }

    @Test("two concurrent runs (two replicas) apply every file exactly once")
    func concurrentRunsApplyOnce() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let migrations = self.migrations
        let (results, recorded) = try await url.withClient(poolSize: 2) { clientA in
            try await url.withClient(poolSize: 2) { clientB in
                async let first = Migrator(migrations: migrations, logger: TestEnvironment.quietLogger).migrate(client: clientA)
                async let second = Migrator(migrations: migrations, logger: TestEnvironment.quietLogger).migrate(client: clientB)
                let results = try await [first, second]
                let rows = try await clientA.query("SELECT count(*)::int FROM schema_migrations")
                var count = 0
                for try await value in rows.decode(Int.self) { count = value }
                return (results, count)
            }
        }
        #expect(results.flatMap { $0 }.sorted() == migrations.map(\.version))
        #expect(results.contains { $0.isEmpty })
        #expect(recorded == migrations.count)
    }

    @Test("serve refuses a database behind the newest migration, naming bff migrate")
    func serveRefusesStaleSchema() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let migrations = self.migrations
        let error: MigrationError? = try await url.withClient(poolSize: 2) { client in
            try await Migrator(migrations: Array(migrations.dropLast()), logger: TestEnvironment.quietLogger).migrate(client: client)
            do {
                try await Migrator(migrations: migrations, logger: TestEnvironment.quietLogger).requireCurrent(client: client)
                return nil
            } catch let error as MigrationError {
                return error
            }
        }
        let latest = migrations.last!.version
        #expect(error == .schemaBehind(current: latest - 1, latest: latest))
        #expect(error?.description.contains("bff migrate") == true)
    }

    @Test("a migration merged after a newer one was applied: serve and readiness refuse the database until migrate applies it")
    func olderMigrationMissing() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let files = [
            Migration(version: 1, name: "one", sql: "CREATE TABLE one (id int)"),
            Migration(version: 2, name: "two", sql: "CREATE TABLE two (id int)"),
            Migration(version: 3, name: "three", sql: "CREATE TABLE three (id int)"),
        ]
        let logger = TestEnvironment.quietLogger
        let (refusal, applied, afterwards) = try await url.withClient(poolSize: 2) { client in
            try await Migrator(migrations: [files[0], files[2]], logger: logger).migrate(client: client)
            let database = Database(client: client)
            let health = HealthHandlers(database: database, versions: files.map(\.version))
            let notReady = await health.readiness()
            var refusal: MigrationError?
            do { try await Migrator(migrations: files, logger: logger).requireCurrent(client: client) } catch let error as MigrationError { refusal = error }
            let applied = try await Migrator(migrations: files, logger: logger).migrate(client: client)
            try await Migrator(migrations: files, logger: logger).requireCurrent(client: client)
            let ready = await health.readiness()
            if case .failure(let error) = notReady { #expect(error.code == .notReady) } else { Issue.record("ready while 2 is missing") }
            return (refusal, applied, try ready.get())
        }
        #expect(refusal == .versionsMissing([2]))
        #expect(refusal?.description.contains("bff migrate") == true)
        #expect(applied == [2])
        #expect(afterwards == 3)
    }

    @Test("each stored function in the migrated database is its file: the body (prosrc) and the signature PostgreSQL makes of the file, and its checksum is recorded")
    func storedFunctionsAreTheirFiles() async throws {
        let functions = try StoredFunction.load(from: TestEnvironment.migrationsDirectory)
        #expect(
            functions.map(\.name) == [
                "bff_achievements", "bff_admit_turn", "bff_answer_idempotency_key", "bff_catalogue_name", "bff_claim_idempotency_key", "bff_enqueue_jobs",
                "bff_give_back_turn", "bff_learner_day", "bff_learner_facts", "bff_record_deliveries", "bff_record_pushes", "bff_refresh_rotate_ring",
                "bff_request_subscription_syncs", "bff_reserve_turn", "bff_store_turn", "bff_stored_achievements", "bff_streak_sweep",
            ])
        let url = try await TestDatabases.shared.makeMigrated()
        try await url.withClient { client in
            try await client.withConnection { connection in
                // The file read into a schema of its own: what PostgreSQL makes of it is compared,
                // since pg_get_functiondef rewrites the header.
                _ = try await connection.query("CREATE SCHEMA reference", logger: TestEnvironment.quietLogger)
                _ = try await connection.query("SET search_path = reference, public", logger: TestEnvironment.quietLogger)
                for function in functions {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: function.sql), logger: TestEnvironment.quietLogger)
                    let rows = try await connection.query(
                        """
                        SELECT d.prosrc = f.prosrc, pg_get_function_arguments(d.oid) = pg_get_function_arguments(f.oid),
                               pg_get_function_result(d.oid) = pg_get_function_result(f.oid), d.prolang = f.prolang,
                               (SELECT checksum FROM public.schema_functions WHERE name = \(function.name))
                        FROM pg_proc d, pg_proc f
                        WHERE d.proname = \(function.name) AND d.pronamespace = 'public'::regnamespace
                          AND f.proname = \(function.name) AND f.pronamespace = 'reference'::regnamespace
                        """, logger: TestEnvironment.quietLogger)
                    var compared = 0
                    for try await (body, arguments, result, language, checksum) in rows.decode((Bool, Bool, Bool, Bool, String?).self) {
                        compared += 1
                        #expect(body && arguments && result && language, "\(function.name) in the database differs from its file")
                        #expect(checksum == function.checksum)
                    }
                    #expect(compared == 1, "\(function.name): one definition in the database, one from the file")
                }
            }
        }
    }

    @Test("a stored function whose file changed: the server refuses the database until migrate applies it, once")
    func changedStoredFunction() async throws {
        let url = try await TestDatabases.shared.makeEmpty()
        let logger = TestEnvironment.quietLogger
        let original = try #require(try StoredFunction.load(from: TestEnvironment.migrationsDirectory).first { $0.name == "bff_refresh_rotate_ring" })
        let changed = StoredFunction(
            name: original.name, sql: original.sql.replacingOccurrences(of: "outcome := 'rotated';", with: "outcome := 'rotated'; -- changed"))
        #expect(changed.checksum != original.checksum)
        let (refusal, body) = try await url.withClient(poolSize: 2) { [migrations] client in
            try await Migrator(migrations: migrations, functions: [original], logger: logger).migrate(client: client)
            let next = Migrator(migrations: migrations, functions: [changed], logger: logger)
            var refusal: MigrationError?
            do { try await next.requireCurrent(client: client) } catch let error as MigrationError { refusal = error }
            #expect(try await next.migrate(client: client).isEmpty, "no numbered migration was pending")
            try await next.requireCurrent(client: client)
            let applied = try await client.query("SELECT applied_at FROM schema_functions").collect().count
            #expect(applied == 1)
            let body = try await client.query("SELECT prosrc FROM pg_proc WHERE proname = \(original.name)")
                .collect().first?.decode(String.self)
            return (refusal, body)
        }
        #expect(refusal == .functionsBehind([original.name]))
        #expect(refusal?.description.contains("bff migrate") == true)
        #expect(body?.contains("-- changed") == true)
    }

    @Test("the single-child rotation wrapper is gone")
    func deadWrapperDropped() async throws {
        let url = try await TestDatabases.shared.makeMigrated()
        let names = try await url.withClient { client in
            try await client.query("SELECT proname::text FROM pg_proc WHERE proname LIKE 'bff_refresh_rotate%' ORDER BY 1")
                .collect().map { try $0.decode(String.self) }
        }
        #expect(names == ["bff_refresh_rotate_ring"])
    }
}
