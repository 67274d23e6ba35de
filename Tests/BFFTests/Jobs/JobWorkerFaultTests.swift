import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

#if canImport(Glibc)
import Glibc
#endif

/// What a worker survives in production: being killed outright, and its database restarting.
@Suite("Job worker faults", .needsDatabase, .serialized, .timeLimit(.minutes(3)))
struct JobWorkerFaultTests {
    /// `bff jobs work`, the real binary, with the test's database and a 5 s lease (the shortest allowed).
    func startWorker(_ database: DatabaseURL) throws -> Process {
        let binary = TestEnvironment.repository.appendingPathComponent(".build/debug/bff").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build bff first (scripts/test does)")
        let worker = Process()
        worker.executableURL = URL(fileURLWithPath: binary)
        worker.arguments = ["jobs", "work"]
        worker.environment = TestEnvironment.serverEnvironment(
            database: database, ["BFF_LOG_LEVEL": "critical", "BFF_JOBS_LEASE": "5", "BFF_JOBS_POLL_INTERVAL_MS": "200"]
        ).merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        worker.standardOutput = FileHandle.nullDevice
        worker.standardError = FileHandle.nullDevice
        try worker.run()
        return worker
    }

    func job(_ database: DatabaseURL, kind: String) async throws -> (state: String, attempt: Int, lockedBy: String?)? {
        try await database.withClient { client in
            for try await (state, attempt, lockedBy) in try await client.query(
                "SELECT state, attempt, locked_by FROM jobs WHERE kind = \(kind) ORDER BY id LIMIT 1"
            ).decode((String, Int32, String?).self) { return (state, Int(attempt), lockedBy) }
            return nil
        }
    }

    @Test("`bff jobs work` killed with SIGKILL mid-job loses nothing: after its lease another worker runs the job again, and its pushes are enqueued once")
    func killedWorker() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let recallID = UUID()
        let due = Date()
        let logger = TestEnvironment.quietLogger
        try await database.withClient { client in
            try await client.withTransaction(logger: logger) { connection in
                let chatID = UUID()
                _ = try await connection.query(
                    "INSERT INTO chats (id, user_id, title, status) VALUES (\(chatID), \(learner.id), 'Photosynthesis', 'ended')", logger: logger)
                _ = try await connection.query(
                    """
                    INSERT INTO recalls (id, user_id, chat_id, interval_seconds, target_at, due_at)
                    VALUES (\(recallID), \(learner.id), \(chatID), 86400, \(due), \(due))
                    """, logger: logger)
                _ = try await connection.query(
                    """
                    INSERT INTO user_settings (user_id, difficulty, notify_start, notify_end, timezone, theme)
                    VALUES (\(learner.id), 3, '00:00', '00:00', 'Asia/Tokyo', 'system')
                    """, logger: logger)
                _ = try await connection.query(
                    """
                    INSERT INTO push_tokens (user_id, token, platform, provider, device_id) VALUES
                        (\(learner.id), \(String(repeating: "c4", count: 32)), 'ios', 'apns', 'phone-killed-worker'),
                        (\(learner.id), 'tablet:APA91b-killed-worker', 'android', 'fcm', 'tablet-killed-worker')
                    """, logger: logger)
                try await RecallDelivery.enqueueDelivery(recallID: recallID, userID: learner.id, dueAt: due, on: connection, logger: logger)
            }
        }

        // The test holds the recalls table, so the delivery the first worker claims waits mid-job.
        try await database.withClient(poolSize: 2) { client in
            try await client.withTransaction(logger: logger) { connection in
                _ = try await connection.query("LOCK TABLE recalls IN ACCESS EXCLUSIVE MODE", logger: logger)
                let first = try startWorker(database)
                defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
                try #require(try await connection.awaitLockWaiter(on: "recalls"), "the worker never reached the recall")
                kill(first.processIdentifier, SIGKILL)
                try #require(try await eventually(within: .seconds(10)) { !first.isRunning }, "the worker survived SIGKILL")
            }
        }
        // Nothing released the job: it is still the dead worker's until its lease runs out.
        let orphaned = try #require(try await job(database, kind: RecallDelivery.deliverKind))
        #expect(orphaned.state == "running" && orphaned.attempt == 1 && orphaned.lockedBy != nil, "\(orphaned)")

        let second = try startWorker(database)
        defer { if second.isRunning { second.terminate() } }
        let completed = try await eventually(within: .seconds(30), every: .milliseconds(200)) {
            try await job(database, kind: RecallDelivery.deliverKind)?.state == "completed"
        }
        #expect(completed, "the delivery was not run again after the lease")
        let rerun = try #require(try await job(database, kind: RecallDelivery.deliverKind))
        #expect(rerun.attempt == 2 && rerun.lockedBy == nil, "\(rerun)")
        // One push job per device, whatever ran twice.
        let pushes = try await database.withClient { client in
            var keys: [String] = []
            for try await key in try await client.query(
                "SELECT unique_key FROM jobs WHERE kind = \(RecallDelivery.sendKind) AND user_id = \(learner.id) ORDER BY unique_key"
            ).decode(String.self) { keys.append(key) }
            return keys
        }
        #expect(pushes.count == 2 && Set(pushes).count == 2, "\(pushes)")
        // SIGTERM: the worker drains (nothing is running) and exits cleanly.
        second.terminate()
        #expect(try await eventually(within: .seconds(15)) { !second.isRunning }, "bff jobs work still ran 15 s after SIGTERM")
        if !second.isRunning { #expect(second.terminationStatus == 0) }
    }

    @Test("PostgreSQL restarted under a running worker: it reconnects, and a job enqueued after the restart runs within seconds")
    func databaseRestart() async throws {
        let cluster = try ThrowawayCluster(name: "jobs")
        try await cluster.run("destroy")
        try await cluster.run("init")
        try await cluster.run("start")
        do {
            try await restart(cluster)
        } catch {
            try? await cluster.run("destroy")
            throw error
        }
        try await cluster.run("destroy")
    }

    private func restart(_ cluster: ThrowawayCluster) async throws {
        let url = try cluster.url
        _ = try await url.withClient(poolSize: 2) { client in
            try await Migrator(directory: TestEnvironment.migrationsDirectory, logger: TestEnvironment.quietLogger).migrate(client: client)
        }
        let ran = NIOLockedValueBox<[Int]>([])
        struct Args: Codable { let n: Int }
        let handler = JobHandler(kind: "test.restart") { job in
            let n = try job.decode(Args.self).n
            ran.withLockedValue { $0.append(n) }
        }
        // A poll of 30 s: a job run within seconds after the restart was found through LISTEN again.
        let database = Database(client: PostgresClient(configuration: url.clientConfiguration(poolSize: 4)), timeout: .seconds(3))
        let worker = JobWorker(
            database: database, databaseURL: url, handlers: [handler],
            configuration: .init(concurrency: 2, pollInterval: .seconds(30), lease: .seconds(30), drain: .seconds(2)),
            logger: TestEnvironment.quietLogger)
        @Sendable func enqueue(_ n: Int) async throws {
            try await url.withClient { client in
                try await client.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                    _ = try await JobQueue.enqueue("test.restart", Args(n: n), on: connection, logger: TestEnvironment.quietLogger)
                }
            }
        }
        try await Commands.withDatabase(database.client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                defer { worker.stop() }
                // Until the worker listens: the first job runs, whether by notification or first claim.
                try await enqueue(1)
                try #require(try await eventually(within: .seconds(20)) { ran.withLockedValue { $0 } == [1] })

                try await cluster.run("stop")
                try await Task.sleep(for: .seconds(1))
                try await cluster.run("start")
                // The worker's LISTEN reconnects (it retries every second or so); enqueue once it may have.
                try await Task.sleep(for: .seconds(3))
                try await enqueue(2)
                let start = ContinuousClock.now
                let second = try await eventually(within: .seconds(20)) { ran.withLockedValue { $0 } == [1, 2] }
                #expect(second, "the job enqueued after the restart did not run")
                #expect(ContinuousClock.now - start < .seconds(10), "it ran only after \(ContinuousClock.now - start)")
                worker.stop()
                try await group.waitForAll()
            }
        }
    }
}
