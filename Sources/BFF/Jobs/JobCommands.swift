import BFFJobs
import BFFPlatform
import Foundation
import Logging
import ServiceLifecycle

/// `bff jobs …`: a worker-only process, one periodic job run once, and the dead-letter queue's tools.
extension Commands {
    /// Runs job workers (no HTTP server) until SIGTERM/SIGINT, then lets running jobs finish within
    /// `BFF_SHUTDOWN_GRACE` and releases the rest. Reads the database, the process settings and the
    /// features whose jobs it runs; no OIDC client, no signing keys.
    public static func jobsWork(environment: [String: String]) async throws {
        let configuration = try WorkerConfiguration(environment: environment)
        let runtime = configuration.process.jobs
        guard runtime.concurrency > 0 else {
            throw ConfigurationError("BFF_JOBS_CONCURRENCY", "is 0, so a worker would run nothing")
        }
        let logger = makeLogger(level: configuration.base.logLevel)
        let telemetry = try Telemetry.start(environment: environment, logger: logger)
        let base = try BaseServices(configuration: configuration.base, logger: logger)
        let features = try FeatureServices(base: base, configuration: configuration.features)
        configuration.features.announce(logger, runsJobs: true)
        // The admin listener answers from the start: /readyz is 503 until the schema is current.
        let readiness = HealthHandlers(base).readiness
        let health: [ServiceGroupConfiguration.ServiceConfiguration] =
            [.init(service: HealthSampler(readiness: readiness))]
            + (configuration.process.admin.map { [.init(service: AdminListener.application($0, readiness: readiness, logger: logger))] } ?? [])
        // The worker runs inside the pools' lifetime (a pool runs once): they outlive its drain.
        try await base.withCurrentSchema {
            logger.info("starting the job worker", metadata: ["version": .string(BuildInfo.version), "commit": .string(BuildInfo.commit)])
            let group = ServiceGroup(
                configuration: .init(
                    // Stopped in reverse order: the exporter sends the spans of the last jobs.
                    services: telemetry.map { .init(service: $0) } + health
                        + [
                            .init(
                                service: features.jobs(retention: runtime.retention).worker(base, configuration: runtime),
                                successTerminationBehavior: .gracefullyShutdownGroup)
                        ],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger
                ).withShutdownGrace(configuration.process.shutdownGrace))
            try await group.run()
        }
    }

    /// The periodic jobs `bff jobs run` takes, each with the part of the configuration it reads.
    static let periodicJobs: [(name: String, make: @Sendable (EnvironmentReader, BaseServices) throws -> PeriodicJob)] = [
        (MaintenanceJob.kind, { reader, base in MaintenanceJob.periodic(base, retention: try ProcessConfiguration.jobRetention(reader)) }),
        (SubscriptionSync.expiryKind, { reader, base in try subscriptionJob(SubscriptionSync.expiryKind, reader, base) }),
        (SubscriptionSync.reconcileKind, { reader, base in try subscriptionJob(SubscriptionSync.reconcileKind, reader, base) }),
        (
            StreakSweep.kind,
            { reader, base in
                try FeatureServices.streakSweep(base: base, interval: FeatureConfiguration.streakSweepInterval(reader)).periodic
            }
        ),
    ]

    private static func subscriptionJob(_ kind: String, _ reader: EnvironmentReader, _ base: BaseServices) throws -> PeriodicJob {
        let configuration = try SubscriptionConfiguration(reader)
        let sync = try FeatureServices.subscriptionSync(base: base, configuration: configuration, outbound: try OutboundHTTPConfiguration(reader))
        guard let job = sync.periodic.first(where: { $0.handler.kind == kind }) else { preconditionFailure("\(kind) is a periodic job of SubscriptionSync") }
        return job
    }

    /// The names `jobsRun` takes.
    public static var periodicJobNames: [String] { periodicJobs.map(\.name) }

    /// Runs the periodic job `name` once, here and now, outside the queue (a Container Apps Job or a
    /// Kubernetes CronJob, docs/requirements.md §8.5); throws what the run threw. Reads the database and
    /// that job's own settings only.
    public static func jobsRun(environment: [String: String], name: String) async throws {
        guard let entry = periodicJobs.first(where: { $0.name == name }) else {
            throw ConfigurationError("NAME", "\(name) is not a periodic job (one of: \(periodicJobNames.joined(separator: ", ")))")
        }
        let base = try operatorServices(environment: environment, quiet: false)
        let job = try entry.make(EnvironmentReader(environment), base)
        try await base.withCurrentSchema { try await job.runOnce() }
    }

    public struct JobSummary: Sendable, Codable {
        public let id: Int64
        public let kind: String
        public let state: String
        public let attempt: Int
        public let maxAttempts: Int
        public let runAt: Date
        public let createdAt: Date
        public let finishedAt: Date?
        public let lastError: String?
    }

    /// The newest jobs (at most `limit`), of a state and a kind when given. Arguments are not shown:
    /// they may hold push tokens.
    public static func jobsList(environment: [String: String], state: String?, kind: String?, limit: Int) async throws -> [JobSummary] {
        if let state, !JobStore.states.contains(state) {
            throw ConfigurationError("--state", "must be one of \(JobStore.states.joined(separator: ", "))")
        }
        let database = try operatorDatabase(environment: environment)
        let jobs = try await withDatabase(database) { _ in try await JobStore(database: database).list(state: state, kind: kind, limit: limit) }
        return jobs.map { job in
            JobSummary(
                id: job.id, kind: job.kind, state: job.state, attempt: job.attempt, maxAttempts: job.maxAttempts, runAt: job.runAt,
                createdAt: job.createdAt, finishedAt: job.finishedAt, lastError: job.lastError)
        }
    }

    /// Puts a dead or discarded job back in the queue with its attempts reset.
    public static func jobsRetry(environment: [String: String], id: Int64) async throws {
        let database = try operatorDatabase(environment: environment)
        try await withDatabase(database) { _ in try await JobStore(database: database).retry(id: id) }
    }

    /// Takes a waiting or dead job out of the queue for good.
    public static func jobsDiscard(environment: [String: String], id: Int64) async throws {
        let database = try operatorDatabase(environment: environment)
        try await withDatabase(database) { _ in try await JobStore(database: database).discard(id: id) }
    }
}
