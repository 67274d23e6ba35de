import BFFPlatform
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import ServiceLifecycle

/// How a process runs jobs (`BFF_JOBS_*`, docs/configuration.md).
public struct JobRuntimeConfiguration: Sendable {
    /// Jobs of one kind running at once in this process, for kinds that do not set their own.
    public var concurrency: Int
    /// The longest a due job waits when its NOTIFY was lost; also how often leases are checked and
    /// periodic jobs enqueued.
    public var pollInterval: Duration
    /// How long a claimed job is the worker's; renewed while it runs, so only a dead worker's runs out.
    public var lease: Duration
    /// Finished jobs are kept this long (unique keys hold as long), then purged.
    public var retention: Duration
    /// At SIGTERM: how long running jobs may finish before the rest are released to other workers.
    public var drain: Duration
    var backoff = Backoff()

    public init(
        concurrency: Int = 10, pollInterval: Duration = .seconds(1), lease: Duration = .seconds(60),
        retention: Duration = .seconds(7 * 86_400), drain: Duration = .seconds(8)
    ) {
        self.concurrency = concurrency
        self.pollInterval = pollInterval
        self.lease = lease
        self.retention = retention
        self.drain = drain
    }
}

/// Claims and runs jobs: one loop per process that claims each kind's due jobs with SKIP LOCKED up to
/// that kind's free slots, runs them as child tasks, and waits for a NOTIFY, a finished job or the poll
/// interval. At SIGTERM it stops claiming, lets running jobs finish within `drain`, and releases the
/// rest for other workers. Its `JobNotifier` LISTENs and its `JobMaintainer` keeps leases and periodic
/// jobs, both driven from here.
public final class JobWorker: Service, Sendable {
    public let id: String
    private let store: JobStore
    private let completer: JobCompleter
    private let notifier: JobNotifier
    private let maintainer: JobMaintainer
    private let handlers: [String: JobHandler]
    private let configuration: JobRuntimeConfiguration
    private let logger: Logger
    private let started: StartupGate?
    private let doorbell: Doorbell
    private let stopping = NIOLockedValueBox(false)
    private let inFlight = NIOLockedValueBox<[Int64: Job]>([:])

    /// A worker for `handlers` (no periodic jobs); `databaseURL` is for its LISTEN connection, outside
    /// `database`'s pools.
    public convenience init(
        database: Database, databaseURL: DatabaseURL, handlers: [JobHandler], configuration: JobRuntimeConfiguration, logger: Logger
    ) {
        self.init(
            database: database, databaseURL: databaseURL, handlers: handlers, periodic: [], configuration: configuration, logger: logger,
            started: nil)
    }

    package init(
        database: Database, databaseURL: DatabaseURL, handlers: [JobHandler], periodic: [PeriodicJob],
        configuration: JobRuntimeConfiguration, logger: Logger, started: StartupGate?
    ) {
        let store = JobStore(database: database)
        var byKind: [String: JobHandler] = [:]
        for handler in handlers + periodic.map(\.handler) { byKind[handler.kind] = handler }
        let kinds = Array(byKind.keys)
        let id = "\(ProcessInfo.processInfo.hostName.prefix(100)):\(getpid()):\(UUID().uuidString.prefix(8).lowercased())"
        let doorbell = Doorbell()
        self.id = id
        self.store = store
        self.handlers = byKind
        self.configuration = configuration
        self.logger = logger
        self.started = started
        self.doorbell = doorbell
        self.completer = JobCompleter(store: store, worker: id)
        self.notifier = JobNotifier(
            databaseURL: databaseURL, kinds: kinds, pollInterval: configuration.pollInterval, doorbell: doorbell, logger: logger,
            connectionLogger: database.logger)
        self.maintainer = JobMaintainer(
            database: database, store: store, worker: id, kinds: kinds, periodic: periodic, lease: configuration.lease, doorbell: doorbell,
            logger: logger)
    }

    public func run() async throws {
        if let started { await cancelWhenGracefulShutdown { await started.wait() } }
        guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
        logger.info("job worker started", metadata: ["worker": .string(id), "kinds": .string(handlers.keys.sorted().joined(separator: ","))])
        await withGracefulShutdownHandler {
            await self.work()
        } onGracefulShutdown: {
            self.stop()
        }
        logger.info("job worker stopped", metadata: ["worker": .string(id)])
    }

    /// Stops claiming; running jobs get `drain` to finish.
    public func stop() {
        stopping.withLockedValue { $0 = true }
        doorbell.ring()
    }

    private var isStopping: Bool { stopping.withLockedValue { $0 } || Task.isCancelled }

    private func work() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.notifier.listen(until: { self.isStopping }) }
            await self.claimUntilStopped(&group)
            // Draining: running jobs may finish; the rest are released below.
            let deadline = ContinuousClock.now + self.configuration.drain
            while !self.inFlight.withLockedValue({ $0.isEmpty }), ContinuousClock.now < deadline {
                await self.doorbell.wait(upTo: .milliseconds(100))
            }
            self.notifier.close()
            group.cancelAll()
        }
        let unfinished = inFlight.withLockedValue { jobs in
            defer { jobs = [:] }
            return Array(jobs.keys)
        }
        guard !unfinished.isEmpty else { return }
        do {
            try await store.release(ids: unfinished, worker: id)
            logger.notice("jobs released at shutdown", metadata: ["count": .stringConvertible(unfinished.count)])
        } catch {
            logger.warning(
                "releasing jobs at shutdown failed: their leases expire instead",
                metadata: ["count": .stringConvertible(unfinished.count), "error": .string(LoggableError.describe(error))])
        }
    }

    /// Between two claims of a kind while its jobs run: completions gather meanwhile, so that a busy
    /// worker claims several jobs in one statement instead of one per finished job. Measured with
    /// `scripts/bench push`: claiming on every completion made the claim loop most of PostgreSQL's work.
    static let claimCooldown: Duration = .milliseconds(10)

    /// The free slots a kind needs before the loop claims it again: one, or while its queue is deep a
    /// quarter of its concurrency. Measured with `scripts/bench push`'s morning round (100,000 recalls
    /// due at once, 128 at a time per process): claiming whatever had freed took about five jobs per
    /// claim, 20,550 claims at 8.6 ms, the largest share of PostgreSQL's time.
    private func claimFloor(kind: String, deep: Bool) -> Int {
        guard deep else { return 1 }
        return max(1, (handlers[kind]?.concurrency ?? configuration.concurrency) / 4)
    }

    private func claimUntilStopped(_ group: inout DiscardingTaskGroup) async {
        var free: [String: Int] = [:]
        for handler in handlers.values { free[handler.kind] = handler.concurrency ?? configuration.concurrency }
        let freed = NIOLockedValueBox<[String: Int]>([:])
        var lastHousekeeping = ContinuousClock.now - configuration.pollInterval
        var lastRenewal = ContinuousClock.now
        var lastDepth = ContinuousClock.now - .seconds(60)
        // Kinds that may have due jobs: a kind whose claim came back short is not asked again until a
        // NOTIFY names it, a job of it comes due, or the poll interval passes.
        var mayHaveWork = Set(handlers.keys)
        // Kinds whose last claim came back full: more are due than this worker runs at once.
        var deep: Set<String> = []
        // Where the last full claim of a deep kind ended: the next claim starts after it. A job that
        // becomes available behind it (a lease that ran out, a transaction that committed late) is
        // claimed by the next claim from the head: at every poll interval, and once the kind drains.
        var cursors: [String: JobStore.ClaimCursor] = [:]
        func takeReturnedSlots() {
            let returned = freed.withLockedValue { counts in
                defer { counts = [:] }
                return counts
            }
            for (kind, count) in returned { free[kind, default: 0] += count }
            mayHaveWork.formUnion(notifier.takeNotified())
        }
        while !isStopping {
            takeReturnedSlots()
            let now = ContinuousClock.now
            if now - lastHousekeeping >= configuration.pollInterval {
                lastHousekeeping = now
                cursors = [:]
                await maintainer.rescueExpiredLeases()
                await maintainer.enqueuePeriodicJobs()
                mayHaveWork = Set(handlers.keys)
            }
            if now - lastRenewal >= configuration.lease / 3 {
                lastRenewal = now
                if !inFlight.withLockedValue({ $0.isEmpty }) { await maintainer.renewLeases() }
            }
            if now - lastDepth >= .seconds(15) {
                lastDepth = now
                await maintainer.recordDepth()
            }
            var busy = false
            for kind in free.keys.sorted() {
                let limit = free[kind, default: 0]
                guard limit > 0, mayHaveWork.contains(kind), !isStopping else { continue }
                let jobs: [Job]
                let after = cursors[kind]
                do {
                    (jobs, cursors[kind]) = try await store.claim(kind: kind, limit: limit, worker: id, lease: configuration.lease, after: after)
                } catch {
                    logger.warning("job claim failed", metadata: ["kind": .string(kind), "error": .string(LoggableError.describe(error))])
                    continue
                }
                // A full batch: more may be due; claim again once enough slots free up.
                if jobs.count == limit {
                    busy = true
                    deep.insert(kind)
                } else {
                    deep.remove(kind)
                    cursors[kind] = nil
                    // Short past a cursor: jobs may still wait behind it; the next pass claims from the head.
                    if after == nil { mayHaveWork.remove(kind) } else { busy = true }
                }
                free[kind, default: 0] -= jobs.count
                for job in jobs {
                    inFlight.withLockedValue { $0[job.id] = job }
                    group.addTask {
                        // A root span per run: the job's database and outbound calls are its children.
                        await Telemetry.span(
                            "job \(job.kind)", kind: .consumer, attributes: ["bff.job.kind": .string(job.kind), "bff.job.attempt": .int64(Int64(job.attempt))]
                        ) { _ in await self.execute(job) }
                        freed.withLockedValue { $0[kind, default: 0] += 1 }
                        self.doorbell.ring()
                    }
                }
            }
            let running = inFlight.withLockedValue { $0.count }
            if busy {
                // With a deep queue, claim once a share of the slots is free, not on every completion:
                // each claim is a statement (see `claimFloor`).
                let deadline = ContinuousClock.now + configuration.pollInterval
                while !isStopping {
                    takeReturnedSlots()
                    if mayHaveWork.contains(where: { free[$0, default: 0] >= claimFloor(kind: $0, deep: deep.contains($0)) }) { break }
                    let now = ContinuousClock.now
                    guard now < deadline else { break }
                    await doorbell.wait(upTo: deadline - now)
                }
                try? await Task.sleep(for: Self.claimCooldown)
                continue
            }
            // While jobs run, each completion wakes the loop, which looks again; idle, it waits for the
            // next job to come due (or a NOTIFY, or the poll interval).
            var wait = configuration.pollInterval
            if running == 0, let next = try? await store.nextRunAt(kinds: Array(handlers.keys)) {
                let until = Duration.milliseconds(Int64(max(next.timeIntervalSinceNow, 0) * 1000) + 5)
                wait = min(wait, until)
            }
            let waited = ContinuousClock.now
            await doorbell.wait(upTo: wait)
            if ContinuousClock.now - waited >= wait { mayHaveWork = Set(handlers.keys) }
            if running > 0 { try? await Task.sleep(for: Self.claimCooldown) }
        }
    }

    /// Runs one job and records its outcome. A run cut short by shutdown records nothing: the job is
    /// released (or, if the process dies, its lease expires) and runs again elsewhere.
    private func execute(_ job: Job) async {
        guard let handler = handlers[job.kind] else { return }
        let dimensions = [("kind", job.kind)]
        Metrics.Timer(label: "bff_job_queue_delay_seconds", dimensions: dimensions)
            .recordNanoseconds(Int64(max(0, Date().timeIntervalSince(job.runAt)) * 1e9))
        Counter(label: "bff_job_runs_total", dimensions: dimensions).increment()
        var logger = self.logger
        logger[metadataKey: "job_id"] = .stringConvertible(job.id)
        logger[metadataKey: "kind"] = .string(job.kind)
        logger[metadataKey: "attempt"] = .stringConvertible(job.attempt)
        do {
            try await handler.run(job)
        } catch {
            if isStopping, Task.isCancelled { return }
            await failed(job, error: error, logger: logger)
            inFlight.withLockedValue { _ = $0.removeValue(forKey: job.id) }
            return
        }
        do {
            try await completer.complete(job.id)
            Counter(label: "bff_jobs_total", dimensions: dimensions + [("outcome", "completed")]).increment()
        } catch {
            logger.warning("recording a completed job failed: it runs again after its lease", metadata: ["error": .string(LoggableError.describe(error))])
        }
        inFlight.withLockedValue { _ = $0.removeValue(forKey: job.id) }
    }

    private func failed(_ job: Job, error: any Error, logger: Logger) async {
        let dimensions = [("kind", job.kind)]
        var retryAfter: Duration?
        var dead = false
        var snoozed: Duration?
        switch error {
        case JobFailure.retry(_, let after): retryAfter = after
        case JobFailure.deadLetter: dead = true
        case JobFailure.snooze(_, let after): snoozed = after
        default: break
        }
        let reason = (error as? JobFailure)?.description ?? LoggableError.describe(error)
        let delay = snoozed ?? configuration.backoff.delay(afterAttempt: job.attempt, retryAfter: retryAfter)
        do {
            let isDead = try await store.fail(job, worker: id, error: reason, retryIn: delay, dead: dead, counted: snoozed == nil)
            if snoozed != nil {
                Counter(label: "bff_jobs_total", dimensions: dimensions + [("outcome", "snoozed")]).increment()
                logger.debug("job waits", metadata: ["reason": .string(reason)])
            } else if isDead {
                Counter(label: "bff_jobs_total", dimensions: dimensions + [("outcome", "dead")]).increment()
                Counter(label: "bff_jobs_dead_lettered_total", dimensions: dimensions).increment()
                logger.error("job dead-lettered", metadata: ["error": .string(reason)])
            } else {
                Counter(label: "bff_jobs_total", dimensions: dimensions + [("outcome", "retried")]).increment()
                logger.notice("job failed, will retry", metadata: ["error": .string(reason), "retry_in_seconds": .stringConvertible(delay.seconds)])
            }
        } catch {
            logger.warning("recording a failed job failed: it runs again after its lease", metadata: ["error": .string(LoggableError.describe(error))])
        }
    }
}
