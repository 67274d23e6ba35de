import BFFJobs
import BFFPlatform

/// Every kind of job this build runs, and its periodic ones: `bff serve` and `bff jobs work` take
/// them from `FeatureServices.jobs`.
struct AppJobs: Sendable {
    let handlers: [JobHandler]
    let periodic: [PeriodicJob]

    func worker(_ base: BaseServices, configuration: JobRuntimeConfiguration, started: StartupGate? = nil) -> JobWorker {
        JobWorker(
            database: base.database, databaseURL: base.configuration.database, handlers: handlers, periodic: periodic,
            configuration: configuration, logger: base.logger, started: started)
    }
}
