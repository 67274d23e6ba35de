import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

#if canImport(Glibc)
import Glibc
#endif

/// What a worker survives in production: being killed outright, mid-job and mid-fan-out, and its
/// database restarting.
@Suite("Job worker faults", .needsDatabase, .serialized, .timeLimit(.minutes(3)))
struct JobWorkerFaultTests {
    /// `bff jobs work`, the real binary, with the test's database, a 5 s lease (the shortest allowed)
    /// and `environment` besides.
    func startWorker(_ database: DatabaseURL, _ environment: [String: String] = [:]) throws -> Process {
        let binary = TestEnvironment.repository.appendingPathComponent(".build/debug/bff").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build bff first (scripts/test does)")
        let worker = Process()
        worker.executableURL = URL(fileURLWithPath: binary)
        worker.arguments = ["jobs", "work"]
        let settings = ["BFF_LOG_LEVEL": "critical", "BFF_JOBS_LEASE": "5", "BFF_JOBS_POLL_INTERVAL_MS": "200"].merging(environment) { $1 }
        worker.environment = TestEnvironment.serverEnvironment(database: database, settings)
            .merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
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

    /// A recall of `learner` due now, in a window open all day, with `tokens` (token, platform,
    /// provider) registered and its delivery enqueued.
    func dueRecall(_ database: DatabaseURL, learner: Learner, tokens: [(String, String, String)]) async throws -> UUID {
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
                for (index, (token, platform, provider)) in tokens.enumerated() {
                    let device = "device-\(index)-\(learner.id.uuidString.prefix(8))"
                    _ = try await connection.query(
                        """
                        INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
                        VALUES (\(learner.id), \(token), \(platform), \(provider), \(device))
                        """, logger: logger)
                }
                try await RecallDelivery.enqueueDelivery(recallID: recallID, userID: learner.id, dueAt: due, on: connection, logger: logger)
            }
        }
        return recallID
    }

    /// Local APNs and FCM over TLS while `body` runs; `body` gets the `BFF_*` variables that point a
    /// worker at them.
    func withPushServices<T: Sendable>(
        apns: LocalAPNs, fcm: LocalFCM, _ body: @escaping @Sendable ([String: String]) async throws -> T
    ) async throws -> T {
        let tls = try LocalTLS.make()
        return try await serveLocally(apns.router, tls: tls) { apnsBase in
            try await serveLocally(fcm.router, tls: tls) { fcmBase in
                try await body([
                    "BFF_APNS_KEY_FILE": try apns.keyFile(in: tls.directory), "BFF_APNS_KEY_ID": apns.keyID, "BFF_APNS_TEAM_ID": apns.teamID,
                    "BFF_APNS_TOPIC": apns.topic, "BFF_APNS_BASE_URL": apnsBase,
                    "BFF_FCM_CREDENTIALS_FILE": try fcm.credentialsFile(in: tls.directory, base: fcmBase), "BFF_FCM_BASE_URL": fcmBase,
                    "BFF_OUTBOUND_CA_FILE": tls.certificatePath,
                ])
            }
        }
    }

    /// How many of the recall's pushes were recorded as accepted.
    static func accepted(_ client: PostgresClient, recallID: UUID, userID: UUID) async throws -> Int {
        for try await count in try await client.query(
            "SELECT count(*)::int FROM recall_pushes WHERE recall_id = \(recallID) AND user_id = \(userID) AND outcome = 'accepted'"
        ).decode(Int.self) { return count }
        return 0
    }

    @Test("`bff jobs work` killed with SIGKILL mid-job loses nothing: after its lease another worker runs the job again, and each device is pushed once")
    func killedWorker() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let logger = TestEnvironment.quietLogger
        let phone = String(repeating: "c4", count: 32)
        let apns = LocalAPNs()
        let fcm = LocalFCM()
        let recallID = try await dueRecall(
            database, learner: learner, tokens: [(phone, "ios", "apns"), ("tablet:APA91b-killed-worker", "android", "fcm")])

        try await withPushServices(apns: apns, fcm: fcm) { services in
            // The test holds the recalls table, so the delivery the first worker claims waits mid-job,
            // before it pushed anything.
            try await database.withClient(poolSize: 2) { client in
                try await client.withTransaction(logger: logger) { connection in
                    _ = try await connection.query("LOCK TABLE recalls IN ACCESS EXCLUSIVE MODE", logger: logger)
                    let first = try startWorker(database, services)
                    defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
                    try #require(try await connection.awaitLockWaiter(on: "recalls"), "the worker never reached the recall")
                    // Another of the worker's jobs may wait on the table too (the streak sweep reads finished recalls).
                    let claimed = try await eventually(within: .seconds(10)) { try await job(database, kind: RecallDelivery.deliverKind)?.state == "running" }
                    try #require(claimed, "the worker never claimed the delivery")
                    kill(first.processIdentifier, SIGKILL)
                    try #require(try await eventually(within: .seconds(10)) { !first.isRunning }, "the worker survived SIGKILL")
                }
            }
            // Nothing released the job: it is still the dead worker's until its lease runs out.
            let orphaned = try #require(try await job(database, kind: RecallDelivery.deliverKind))
            #expect(orphaned.state == "running" && orphaned.attempt == 1 && orphaned.lockedBy != nil, "\(orphaned)")

            let second = try startWorker(database, services)
            defer { if second.isRunning { second.terminate() } }
            let completed = try await eventually(within: .seconds(30), every: .milliseconds(200)) {
                try await job(database, kind: RecallDelivery.deliverKind)?.state == "completed"
            }
            #expect(completed, "the delivery was not run again after the lease")
            let rerun = try #require(try await job(database, kind: RecallDelivery.deliverKind))
            #expect(rerun.attempt == 2 && rerun.lockedBy == nil, "\(rerun)")
            // One push per device, whatever ran twice, and no job per push.
            #expect(apns.received.withLockedValue { $0.map(\.deviceToken) } == [phone])
            #expect(fcm.received.withLockedValue { $0.map(\.token) } == ["tablet:APA91b-killed-worker"])
            let accepted = try await database.withClient { client in try await Self.accepted(client, recallID: recallID, userID: learner.id) }
            #expect(accepted == 2)
            #expect(try await job(database, kind: RecallDelivery.sendKind)?.state == nil, "no push.send job")
            // SIGTERM: the worker drains (nothing is running) and exits cleanly.
            second.terminate()
            #expect(try await eventually(within: .seconds(15)) { !second.isRunning }, "bff jobs work still ran 15 s after SIGTERM")
            if !second.isRunning { #expect(second.terminationStatus == 0) }
        }
    }

    @Test("`bff jobs work` killed with SIGKILL mid-fan-out: the next worker pushes only what was not recorded, at most BFF_PUSH_CONCURRENCY devices twice, with the recall's collapse id")
    func killedMidFanOut() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        // 24 iPhones (64 hexadecimal digits each), answered a second after each push: with four
        // permits, a batch of four is in flight for a second at a time.
        let tokens = (0..<24).map { String(repeating: "ab", count: 31) + String(10 + $0) }
        let apns = LocalAPNs(answer: { _, _ in .stall(.seconds(1)) })
        let fcm = LocalFCM()
        let recallID = try await dueRecall(database, learner: learner, tokens: tokens.map { ($0, "ios", "apns") })
        let permits = 4

        try await withPushServices(apns: apns, fcm: fcm) { services in
            let environment = services.merging(["BFF_PUSH_CONCURRENCY": String(permits)]) { $1 }
            try await database.withClient(poolSize: 2) { client in
                let first = try startWorker(database, environment)
                defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
                // A batch accepted and recorded, the next one sent and not yet answered.
                let midway = try await eventually(within: .seconds(30), every: .milliseconds(10)) {
                    let accepted = try await Self.accepted(client, recallID: recallID, userID: learner.id)
                    return accepted >= permits && apns.received.withLockedValue { $0.count } > accepted
                }
                try #require(midway, "the fan-out never had a batch in flight after an accepted one")
                kill(first.processIdentifier, SIGKILL)
                try #require(try await eventually(within: .seconds(10)) { !first.isRunning }, "the worker survived SIGKILL")
                let acceptedBefore = try await Self.accepted(client, recallID: recallID, userID: learner.id)
                #expect(acceptedBefore < tokens.count, "the first worker finished before it was killed")

                let second = try startWorker(database, environment)
                defer { if second.isRunning { second.terminate() } }
                let delivered = try await eventually(within: .seconds(60), every: .milliseconds(200)) {
                    guard try await Self.accepted(client, recallID: recallID, userID: learner.id) == tokens.count else { return false }
                    return try await job(database, kind: RecallDelivery.deliverKind)?.state == "completed"
                }
                #expect(delivered, "not every device's push was accepted after the second worker took the delivery over")
                var status = ""
                for try await value in try await client.query(
                    "SELECT status FROM recalls WHERE id = \(recallID) AND user_id = \(learner.id)"
                ).decode(String.self) { status = value }
                #expect(status == "sent")

                let received = apns.received.withLockedValue { $0 }
                var perToken: [String: Int] = [:]
                for push in received { perToken[push.deviceToken, default: 0] += 1 }
                #expect(Set(perToken.keys) == Set(tokens), "every device got the recall")
                let twice = perToken.values.filter { $0 == 2 }.count
                #expect(twice <= permits, "\(twice) devices got the recall twice; at most the \(permits) in flight at the kill may")
                // Killed with a batch in flight (received, a second from its answer): that batch is sent again.
                #expect(twice >= 1, "nothing was in flight at the kill, so the bound was not put to the test")
                #expect(perToken.values.allSatisfy { $0 <= 2 }, "a device got the recall three times or more")
                // The device shows one notification however many arrived: they share the recall's collapse id.
                let collapseIDs = Set(received.map { $0.headers["apns-collapse-id"] ?? "-" })
                #expect(collapseIDs == [recallID.uuidString.lowercased()])

                second.terminate()
                #expect(try await eventually(within: .seconds(15)) { !second.isRunning }, "bff jobs work still ran 15 s after SIGTERM")
            }
        }
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
