/// Every kind of job this build runs, and its periodic ones: `bff serve`, `bff jobs work` and
/// `bff jobs run` all take them from here.
struct AppJobs: Sendable {
    let handlers: [JobHandler]
    let periodic: [PeriodicJob]

    init(_ dependencies: AppDependencies) {
        handlers =
            RecallDelivery(
                database: dependencies.database, senders: dependencies.pushSenders, deepLinkBase: dependencies.configuration.deepLinkBase,
                pushConcurrency: dependencies.configuration.pushConcurrency, logger: dependencies.logger
            ).handlers
            + (dependencies.llm.map { [TagExtraction(database: dependencies.database, llm: $0, logger: dependencies.logger).handler] } ?? [])
            + dependencies.subscriptionSync.handlers
        periodic = [MaintenanceJob.periodic(dependencies)] + dependencies.subscriptionSync.periodic
    }

    func worker(_ dependencies: AppDependencies, started: StartupGate? = nil) -> JobWorker {
        JobWorker(
            database: dependencies.database, databaseURL: dependencies.configuration.database, handlers: handlers, periodic: periodic,
            configuration: dependencies.configuration.jobs, logger: dependencies.logger, started: started)
    }
}
