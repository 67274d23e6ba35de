import BFFPlatform
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import PostgresNIO

/// The worker's maintenance services, each called from its claim loop on its own schedule: the
/// rescuer (jobs whose worker died), the periodic enqueuer, lease renewal for the worker's own
/// running jobs, and the queue-depth gauge. The purge of finished jobs is `maintenance.purge`'s.
final class JobMaintainer: Sendable {
    private let database: Database
    private let store: JobStore
    /// The worker whose leases are renewed.
    private let worker: String
    /// The kinds the worker runs: each has a depth, zero when it has no jobs.
    private let kinds: [String]
    private let periodic: [PeriodicJob]
    private let lease: Duration
    private let doorbell: Doorbell
    private let logger: Logger
    /// The tick each periodic kind was last enqueued for, so that each tick is enqueued once here.
    private let lastTick = NIOLockedValueBox<[String: Int64]>([:])

    init(
        database: Database, store: JobStore, worker: String, kinds: [String], periodic: [PeriodicJob], lease: Duration,
        doorbell: Doorbell, logger: Logger
    ) {
        self.database = database
        self.store = store
        self.worker = worker
        self.kinds = kinds
        self.periodic = periodic
        self.lease = lease
        self.doorbell = doorbell
        self.logger = logger
    }

    /// Leases that ran out: their jobs run again (the claim loop is woken for them).
    func rescueExpiredLeases() async {
        do {
            let rescued = try await store.rescueExpiredLeases()
            if rescued > 0 {
                Counter(label: "bff_jobs_rescued_total").increment(by: rescued)
                logger.notice("jobs whose worker stopped run again", metadata: ["count": .stringConvertible(rescued)])
                doorbell.ring()
            }
        } catch {
            logger.warning("lease check failed", metadata: ["error": .string(LoggableError.describe(error))])
        }
    }

    /// Periodic ticks: each periodic job's current tick, unless already enqueued from here.
    func enqueuePeriodicJobs() async {
        let now = Date()
        for job in periodic {
            let tick = job.tick(at: now)
            guard lastTick.withLockedValue({ $0[job.handler.kind] }) != tick else { continue }
            do {
                try await database.run { [logger] client in
                    try await client.withConnection { connection in
                        _ = try await JobQueue.enqueue(
                            job.handler.kind, PeriodicTick(tick: tick),
                            options: .init(uniqueKey: "tick:\(tick)", runAt: job.start(ofTick: tick), maxAttempts: 1),
                            on: connection, logger: logger)
                    }
                }
                lastTick.withLockedValue { $0[job.handler.kind] = tick }
            } catch {
                logger.warning("enqueueing a periodic job failed", metadata: ["kind": .string(job.handler.kind), "error": .string(LoggableError.describe(error))])
            }
        }
    }

    /// Extends the leases of the worker's running jobs.
    func renewLeases() async {
        do {
            try await store.renew(worker: worker, lease: lease)
        } catch {
            logger.warning("renewing job leases failed", metadata: ["error": .string(LoggableError.describe(error))])
        }
    }

    func recordDepth() async {
        guard let depth = try? await store.depth() else { return }
        for kind in Set(depth.keys).union(kinds) {
            let counts = depth[kind] ?? QueueDepth()
            for (state, count) in [("available", counts.available), ("scheduled", counts.scheduled), ("running", counts.running), ("dead", counts.dead)] {
                Gauge(label: "bff_jobs_queue_depth", dimensions: [("kind", kind), ("state", state)]).record(count)
            }
        }
    }
}
