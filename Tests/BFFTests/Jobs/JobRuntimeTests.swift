import Foundation
import NIOConcurrencyHelpers
import PostgresNIO
import ServiceLifecycle
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

/// The PostgreSQL job runtime (Sources/BFF/Jobs) on a real database: workers are real `JobWorker`s
/// with short intervals, so each test waits for conditions, never for fixed times.
@Suite("Job runtime", .needsDatabase, .timeLimit(.minutes(3)))
struct JobRuntimeTests {
    let url: DatabaseURL
    let database: Database

    init() async throws {
        url = try await TestDatabases.shared.makeMigrated()
        database = Database(client: PostgresClient(configuration: url.clientConfiguration(poolSize: 6)), timeout: .seconds(10))
    }

    /// Runs `body` with the pool running and `workers` working; stops the workers (as SIGTERM does)
    /// and waits for them before returning.
    func withWorkers<Result: Sendable>(
        _ workers: [JobWorker], _ body: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try await Commands.withDatabase(database.client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in workers { group.addTask { try await worker.run() } }
                do {
                    let result = try await body()
                    for worker in workers { worker.stop() }
                    try await group.waitForAll()
                    return result
                } catch {
                    for worker in workers { worker.stop() }
                    try await group.waitForAll()
                    throw error
                }
            }
        }
    }

    func worker(
        _ handlers: [JobHandler], periodic: [PeriodicJob] = [], poll: Duration = .milliseconds(100),
        lease: Duration = .seconds(30), drain: Duration = .seconds(5), retryBase: Duration = .milliseconds(20)
    ) -> JobWorker {
        var configuration = JobRuntimeConfiguration(concurrency: 4, pollInterval: poll, lease: lease, drain: drain)
        configuration.backoff = Backoff(base: retryBase, cap: .seconds(1))
        return JobWorker(
            database: database, databaseURL: url, handlers: handlers, periodic: periodic, configuration: configuration,
            logger: TestEnvironment.quietLogger, started: nil)
    }

    /// Through a client of its own (`url.withClient`), so that it works with or without the workers' pool running.
    func enqueue(_ kind: String, _ args: [String: Int] = [:], options: JobQueue.Options = .init()) async throws -> Bool {
        try await url.withClient { client in
            try await client.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                try await JobQueue.enqueue(kind, args, options: options, on: connection, logger: TestEnvironment.quietLogger)
            }
        }
    }

    struct Row: Sendable {
        let state: String
        let attempt: Int
        let lastError: String?
    }

    func rows(_ kind: String) async throws -> [Row] {
        try await url.withClient { client in
            var rows: [Row] = []
            for try await (state, attempt, error) in try await client.query(
                "SELECT state, attempt, last_error FROM jobs WHERE kind = \(kind) ORDER BY id"
            ).decode((String, Int32, String?).self) {
                rows.append(Row(state: state, attempt: Int(attempt), lastError: error))
            }
            return rows
        }
    }

    @Test("a job enqueued in a transaction that rolls back does not exist; in one that commits it does, once per unique key")
    func transactionalEnqueue() async throws {
        do {
            struct Rollback: Error {}
            let error = await #expect(throws: PostgresTransactionError.self) {
                try await url.withClient { client in
                    try await client.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                        try await JobQueue.enqueue("test.tx", ["n": 1], on: connection, logger: TestEnvironment.quietLogger)
                        throw Rollback()
                    }
                }
            }
            #expect(error?.closureError is Rollback)
            let afterRollback = try await rows("test.tx")
            #expect(afterRollback.isEmpty)
            let first = try await enqueue("test.tx", options: .init(uniqueKey: "recall-1"))
            let again = try await enqueue("test.tx", options: .init(uniqueKey: "recall-1"))
            let other = try await enqueue("test.tx", options: .init(uniqueKey: "recall-2"))
            let keyless = try await enqueue("test.tx")
            #expect(first && other && keyless)
            #expect(!again, "the same work was enqueued twice")
            let states = try await rows("test.tx").map(\.state)
            #expect(states == ["available", "available", "available"])
        }
    }

    @Test("two workers on one queue run each of 300 jobs exactly once (SKIP LOCKED)")
    func twoWorkersEachJobOnce() async throws {
        let runs = NIOLockedValueBox<[Int: Int]>([:])
        let handler = JobHandler(kind: "test.count") { job in
            let n = try job.decode([String: Int].self)["n"]!
            runs.withLockedValue { $0[n, default: 0] += 1 }
        }
        let workers = [worker([handler]), worker([handler])]
        try await withWorkers(workers) {
            for n in 0..<300 { _ = try await enqueue("test.count", ["n": n]) }
            #expect(try await eventually { runs.withLockedValue { $0.count } == 300 })
            #expect(try await eventually { try await rows("test.count").allSatisfy { $0.state == "completed" } })
        }
        let counts = runs.withLockedValue { $0 }
        #expect(counts.count == 300)
        #expect(counts.values.allSatisfy { $0 == 1 }, "\(counts.filter { $0.value != 1 })")
    }

    @Test("a LISTEN/NOTIFY wake-up: with a 30 s poll, a job enqueued is run within seconds")
    func notifyWakes() async throws {
        let ran = NIOLockedValueBox(false)
        let handler = JobHandler(kind: "test.notify") { _ in ran.withLockedValue { $0 = true } }
        try await withWorkers([worker([handler], poll: .seconds(30))]) {
            // The worker LISTENs once it has started; jobs enqueued before are claimed by its first pass.
            #expect(
                try await eventually {
                    try await url.withClient { client in
                        var listening = false
                        for try await n in try await client.query("SELECT count(*)::int8 FROM pg_stat_activity WHERE query LIKE 'LISTEN%'").decode(Int64.self) {
                            listening = n > 0
                        }
                        return listening
                    }
                })
            let start = ContinuousClock.now
            _ = try await enqueue("test.notify")
            #expect(try await eventually(within: .seconds(10)) { ran.withLockedValue { $0 } })
            #expect(ContinuousClock.now - start < .seconds(5), "woken by the poll, not by the notification")
        }
    }

    @Test("a failed run is retried with backoff and then succeeds; the error is kept until it does")
    func retryThenSuccess() async throws {
        let attempts = NIOLockedValueBox<[Int]>([])
        let handler = JobHandler(kind: "test.flaky") { job in
            attempts.withLockedValue { $0.append(job.attempt) }
            if job.attempt < 3 { throw JobFailure.retry("service unavailable", after: nil) }
        }
        try await withWorkers([worker([handler])]) {
            _ = try await enqueue("test.flaky")
            #expect(try await eventually { try await rows("test.flaky").first?.state == "completed" })
        }
        #expect(attempts.withLockedValue { $0 } == [1, 2, 3])
        let row = try #require(try await rows("test.flaky").first)
        #expect(row.attempt == 3)
        #expect(row.lastError == nil)
    }

    @Test("backoff doubles per attempt within ±25 %, stops at the cap, and never shortens a Retry-After")
    func backoffGrowth() {
        let backoff = Backoff(base: .seconds(1), cap: .seconds(60))
        for attempt in 1...6 {
            let step = Duration.seconds(1 << (attempt - 1))
            #expect(backoff.delay(afterAttempt: attempt, retryAfter: nil, random: 0) == step * 0.75)
            #expect(backoff.delay(afterAttempt: attempt, retryAfter: nil, random: 1) == min(step * 1.25, .seconds(60)))
        }
        #expect(backoff.delay(afterAttempt: 7, retryAfter: nil, random: 1) == .seconds(60))
        #expect(backoff.delay(afterAttempt: 40, retryAfter: nil, random: 0.5) == .seconds(60))
        #expect(backoff.delay(afterAttempt: 1, retryAfter: .seconds(120), random: 0) == .seconds(120))
        #expect(backoff.delay(afterAttempt: 1, retryAfter: .seconds(120), random: 1) == .seconds(132))
    }

    @Test("after its last attempt a job is dead-lettered with its error; `bff jobs retry` queues it again, `discard` ends it")
    func deadLetterAndRetry() async throws {
        let healthy = NIOLockedValueBox(false)
        let handler = JobHandler(kind: "test.dead") { _ in
            if !healthy.withLockedValue({ $0 }) { throw JobFailure.retry("HTTP 503 from the service", after: nil) }
        }
        let environment = TestEnvironment.serverEnvironment(database: url)
        try await withWorkers([worker([handler])]) {
            _ = try await enqueue("test.dead", options: .init(maxAttempts: 3))
            #expect(try await eventually { try await rows("test.dead").first?.state == "dead" })
            let dead = try #require(try await rows("test.dead").first)
            #expect(dead.attempt == 3)
            #expect(dead.lastError == "HTTP 503 from the service")
            let listed = try await Commands.jobsList(environment: environment, state: "dead", kind: nil, limit: 10)
            #expect(listed.map(\.kind) == ["test.dead"])
            await #expect(throws: ConfigurationError.self) { try await Commands.jobsDiscard(environment: environment, id: 999_999) }

            healthy.withLockedValue { $0 = true }
            try await Commands.jobsRetry(environment: environment, id: listed[0].id)
            #expect(try await eventually { try await rows("test.dead").first?.state == "completed" })
            // Completed: nothing to retry or discard.
            await #expect(throws: ConfigurationError.self) { try await Commands.jobsRetry(environment: environment, id: listed[0].id) }
            await #expect(throws: ConfigurationError.self) { try await Commands.jobsDiscard(environment: environment, id: listed[0].id) }
        }
    }

    @Test("a handler's dead letter skips the remaining attempts")
    func deadLetterAtOnce() async throws {
        let handler = JobHandler(kind: "test.payload") { _ in throw JobFailure.deadLetter("413 PayloadTooLarge") }
        try await withWorkers([worker([handler])]) {
            _ = try await enqueue("test.payload")
            #expect(try await eventually { try await rows("test.payload").first?.state == "dead" })
        }
        let row = try #require(try await rows("test.payload").first)
        #expect(row.attempt == 1)
        #expect(row.lastError == "413 PayloadTooLarge")
    }

    @Test("a periodic job runs once per tick with two workers")
    func periodicOncePerTick() async throws {
        let ticks = NIOLockedValueBox<[Int64]>([])
        let periodic = PeriodicJob(
            every: .seconds(1),
            handler: JobHandler(kind: "test.tick") { job in
                ticks.withLockedValue { $0.append(try! job.decode(PeriodicTick.self).tick) }
            })
        try await withWorkers([worker([], periodic: [periodic]), worker([], periodic: [periodic])]) {
            let fourTicks = try await eventually { ticks.withLockedValue { Set($0).count } >= 4 }
            #expect(fourTicks)
        }
        let seen = ticks.withLockedValue { $0 }
        #expect(seen.count == Set(seen).count, "a tick ran more than once: \(seen.sorted())")
    }

    @Test("a claim past a cursor takes the next jobs in the queue's order, exactly at a shared due time; one rescued behind it waits for a claim from the head")
    func claimCursor() async throws {
        // Six jobs due at the same microsecond (the 08:00 window's opening), then one due a second later.
        let due = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 60).rounded())
        for index in 0..<6 { #expect(try await enqueue("test.cursor", ["n": index], options: .init(runAt: due))) }
        #expect(try await enqueue("test.cursor", ["n": 6], options: .init(runAt: due.addingTimeInterval(1))))
        @Sendable func numbers(_ jobs: [Job]) throws -> [Int] { try jobs.map { try $0.decode([String: Int].self)["n"] ?? -1 }.sorted() }
        try await url.withClient { client in
            let store = JobStore(database: Database(client: client))
            let first = try await store.claim(kind: "test.cursor", limit: 2, worker: "w:1", lease: .seconds(30))
            #expect(try numbers(first.jobs) == [0, 1])
            let second = try await store.claim(kind: "test.cursor", limit: 2, worker: "w:1", lease: .seconds(30), after: first.cursor)
            #expect(try numbers(second.jobs) == [2, 3])
            // The first two's worker died: their leases run out and the rescuer makes them available
            // again at their due time, behind the cursor.
            try await client.query("UPDATE jobs SET locked_until = now() - interval '1 second' WHERE id = ANY(\(first.jobs.map(\.id)))")
            #expect(try await store.rescueExpiredLeases() == 2)
            let third = try await store.claim(kind: "test.cursor", limit: 10, worker: "w:1", lease: .seconds(30), after: second.cursor)
            #expect(try numbers(third.jobs) == [4, 5, 6])
            let fromTheHead = try await store.claim(kind: "test.cursor", limit: 10, worker: "w:1", lease: .seconds(30))
            #expect(try numbers(fromTheHead.jobs) == [0, 1])
        }
    }

    @Test("a job whose worker died runs again once its lease has expired")
    func leaseExpiry() async throws {
        let attempts = NIOLockedValueBox<[Int]>([])
        let handler = JobHandler(kind: "test.lease") { job in attempts.withLockedValue { $0.append(job.attempt) } }
        _ = try await enqueue("test.lease")
        // A worker that claims the job and dies (kill -9): nothing ever completes or releases it.
        let claimed = try await url.withClient { client in
            try await JobStore(database: Database(client: client)).claim(kind: "test.lease", limit: 1, worker: "killed:1", lease: .seconds(1)).jobs
        }
        #expect(claimed.count == 1)
        let completed = try await withWorkers([worker([handler])]) {
            try await eventually { try await rows("test.lease").first?.state == "completed" }
        }
        #expect(completed)
        #expect(attempts.withLockedValue { $0 } == [2])
    }

    @Test("at shutdown a running job finishes within the drain; one that does not is released for another worker, its attempt not counted")
    func gracefulShutdown() async throws {
        let started = NIOLockedValueBox<Set<String>>([])
        let quick = JobHandler(kind: "test.quick") { _ in
            started.withLockedValue { _ = $0.insert("quick") }
            try await Task.sleep(for: .milliseconds(300))
        }
        let stuck = JobHandler(kind: "test.stuck") { _ in
            started.withLockedValue { _ = $0.insert("stuck") }
            try await Task.sleep(for: .seconds(120))
        }
        let worker = worker([quick, stuck], drain: .seconds(1))
        try await withWorkers([worker]) {
            _ = try await enqueue("test.quick")
            _ = try await enqueue("test.stuck")
            #expect(try await eventually { started.withLockedValue { $0.count } == 2 })
        }
        #expect(try await rows("test.quick").map(\.state) == ["completed"])
        let stuckRow = try #require(try await rows("test.stuck").first)
        #expect(stuckRow.state == "available")
        #expect(stuckRow.attempt == 0)
    }
}
