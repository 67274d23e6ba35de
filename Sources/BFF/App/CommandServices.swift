import BFFPlatform
import Foundation
import Logging

// The composition root: each service is built once, here or in `AppDependencies`, and each command
// builds only the layers it runs (`BaseServices` for the operator tools, `FeatureServices` on top
// for the job worker, `AppDependencies` on top for the HTTP server).

/// What every command has: the logger, the database pools and the migrations.
public struct BaseServices: Sendable {
    public let configuration: BaseConfiguration
    public let logger: Logger
    public let database: Database
    public let migrator: Migrator
    /// The rate limits' buckets, shared by every replica through the database.
    let limiter: RateLimiter
    /// Users, devices, logins and sessions: the sign-in, the revocation poll, the purges and the
    /// operator commands all use this one.
    let identity: IdentityStore

    public init(configuration: BaseConfiguration, logger: Logger) throws {
        Observability.bootstrap()
        self.configuration = configuration
        self.logger = logger
        database = Database(configuration, logger: logger)
        migrator = try Migrator(directory: configuration.migrationsDirectory, logger: logger)
        limiter = RateLimiter(database: database)
        identity = IdentityStore(database: database, installations: InstallationMirror(route: configuration.pushRoute))
    }

    /// Runs `body` with the pools running, after checking that the schema is this build's.
    func withCurrentSchema<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) async throws -> Result {
        try await Commands.withDatabase(database) { [self] client in
            try await database.waitUntilReachable(configuration.database)
            try await migrator.requireCurrent(client: client)
            return try await body()
        }
    }
}

extension Database {
    /// The pools `configuration` describes.
    init(_ configuration: BaseConfiguration, logger: Logger) {
        var dbLogger = logger
        dbLogger[metadataKey: "component"] = "postgres"
        // Below info, postgres-nio logs each row it receives (PKCE verifiers, emails) and the
        // server's error details, which quote key values.
        dbLogger.logLevel = max(logger.logLevel, .info)
        self.init(
            configuration: configuration.database, perEventLoopOf: .singleton, timeout: configuration.databaseTimeout,
            poolSize: configuration.databasePoolSize, logger: dbLogger)
    }
}

/// The capabilities the jobs run and the API shares with them, each outside service's client built
/// once (its keys read here: a key that cannot be read stops start-up, naming its variable).
public struct FeatureServices: Sendable {
    public let base: BaseServices
    public let configuration: FeatureConfiguration
    let recalls: RecallScheduler
    let pushSenders: PushSenders
    /// The tutoring turn's LLM; nil without `BFF_LLM_BASE_URL`.
    let llm: LLMClient?
    /// Re-syncs from RevenueCat, and the store they write.
    let subscriptionSync: SubscriptionSync
    /// Streaks, totals, mastery and trophies: the API reads them, the streak push too.
    let achievements: AchievementStore

    public init(base: BaseServices, configuration: FeatureConfiguration) throws {
        self.base = base
        self.configuration = configuration
        recalls = RecallScheduler(repetition: SpacedRepetition(base: Double(configuration.recallBaseInterval.components.seconds)))
        pushSenders = try PushSenders(configuration: configuration.push, outbound: configuration.outbound)
        llm = try configuration.llm.map { try LLMClient(configuration: $0, extraCAFile: configuration.outbound.extraCAFile) }
        subscriptionSync = try Self.subscriptionSync(base: base, configuration: configuration.subscriptions, outbound: configuration.outbound)
        achievements = AchievementStore(database: base.database, logger: base.logger)
    }

    /// The sweep that queues the streak pushes (`bff jobs run` builds it from its own reading).
    static func streakSweep(base: BaseServices, interval: Duration) -> StreakSweep {
        StreakSweep(store: StreakPushStore(database: base.database, logger: base.logger), interval: interval, logger: base.logger)
    }

    static func subscriptionSync(base: BaseServices, configuration: SubscriptionConfiguration, outbound: OutboundHTTPConfiguration) throws -> SubscriptionSync {
        SubscriptionSync(
            store: SubscriptionStore(database: base.database, configuration: configuration, logger: base.logger),
            client: try configuration.apiKey.map {
                try RevenueCatClient(baseURL: configuration.baseURL, apiKey: $0, extraCAFile: outbound.extraCAFile, timeout: configuration.timeout)
            },
            limiter: base.limiter, logger: base.logger)
    }

    /// Every job kind this build runs, and its periodic jobs.
    func jobs(retention: Duration) -> AppJobs {
        let database = base.database
        let logger = base.logger
        let installations = pushSenders.hubClient.map {
            [InstallationMirrorJob(tokens: PushTokenStore(database: database), hub: $0, logger: logger).handler]
        }
        let recallDelivery = RecallDelivery(
            database: database, senders: pushSenders, deepLinkBase: configuration.deepLinkBase,
            pushConcurrency: configuration.pushConcurrency, logger: logger)
        // The recalls' permits: BFF_PUSH_CONCURRENCY bounds every push in flight in the process.
        let streakPush = StreakPush(
            achievements: achievements, store: StreakPushStore(database: database, logger: logger), tokens: PushTokenStore(database: database),
            senders: pushSenders, permits: recallDelivery.permits, deepLinkBase: configuration.deepLinkBase,
            pushConcurrency: configuration.pushConcurrency, logger: logger)
        return AppJobs(
            handlers: recallDelivery.handlers
                + [streakPush.handler]
                + (llm.map { [TagExtraction(database: database, llm: $0, logger: logger).handler] } ?? [])
                + subscriptionSync.handlers
                + (installations ?? []),
            periodic: [MaintenanceJob.periodic(base, retention: retention)] + subscriptionSync.periodic
                + [Self.streakSweep(base: base, interval: configuration.streakSweepInterval).periodic])
    }
}
