import BFFJobs
import BFFPlatform
import Foundation
import Logging

// Each `bff` command reads only the variables of what it runs, so a role is given only its own
// secrets: the migrate Job its database URL, the worker no OIDC client or signing keys. The parts
// below compose into each command's configuration; deploy/README.md lists what each command reads.

/// What every command reads: where the database is, its pool, the migrations, the log level and the
/// push route. `bff migrate`, `bff jobs list|retry|discard` and `bff auth revoke` read nothing else.
public struct BaseConfiguration: Sendable {
    public var logLevel: Logger.Level
    public var database: DatabaseURL
    public var databasePoolSize: Int
    public var databaseTimeout: Duration
    /// `BFF_MIGRATIONS_DIR`; unset: `migrations/` beside the executable, else `./migrations`.
    public var migrationsDirectory: String
    /// `BFF_PUSH_ROUTE`: on the hub's route, whatever changes push tokens (the API, the sign-outs,
    /// `bff auth revoke`) enqueues the hub's installation mirrors with its change.
    var pushRoute: PushRoute

    public init(environment: [String: String]) throws {
        try self.init(EnvironmentReader(environment))
    }

    init(_ reader: EnvironmentReader) throws {
        let level = reader.string("BFF_LOG_LEVEL", default: "info")
        guard let parsedLevel = Logger.Level(rawValue: level) else {
            throw ConfigurationError("BFF_LOG_LEVEL", "must be one of trace, debug, info, notice, warning, error, critical")
        }
        logLevel = parsedLevel
        database = try DatabaseURL(parsing: try reader.required("BFF_DATABASE_URL"), variable: "BFF_DATABASE_URL")
        databasePoolSize = try reader.int("BFF_DATABASE_POOL_SIZE", default: 20, range: 1...500)
        databaseTimeout = .seconds(try reader.int("BFF_DATABASE_TIMEOUT", default: 5, range: 1...120))
        migrationsDirectory = reader.optional("BFF_MIGRATIONS_DIR") ?? Self.defaultMigrationsDirectory()
        pushRoute = try PushRoute(reader)
    }

    /// The image ships `migrations/` beside `bff`, and an operator's shell may stand anywhere; a
    /// checkout runs from its root.
    static func defaultMigrationsDirectory() -> String {
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "bff").standardizedFileURL
        let beside = executable.deletingLastPathComponent().appendingPathComponent("migrations").path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: beside, isDirectory: &isDirectory), isDirectory.boolValue { return beside }
        return "migrations"
    }
}

/// The AppJWT and refresh token settings: `bff serve` and `bff auth issue`.
public struct TokenConfiguration: Sendable {
    public var jwtKeys: JWTKeyRing
    public var jwtIssuer: String
    public var jwtAudience: String
    /// `BFF_ACCESS_TTL`: an AppJWT's lifetime.
    public var accessLifetime: Duration
    /// `BFF_REFRESH_TTL`: a refresh token's lifetime.
    public var refreshLifetime: Duration
    /// `BFF_REFRESH_REUSE_INTERVAL`: how long a rotated refresh token still answers a retry.
    public var refreshReuseInterval: Duration

    public init(environment: [String: String]) throws {
        try self.init(EnvironmentReader(environment))
    }

    init(_ reader: EnvironmentReader) throws {
        jwtKeys = try JWTKeyRing(parsing: try reader.required("BFF_JWT_KEYS"))
        jwtIssuer = reader.string("BFF_JWT_ISSUER", default: "bff")
        jwtAudience = reader.string("BFF_JWT_AUDIENCE", default: "mobile")
        accessLifetime = .seconds(try reader.int("BFF_ACCESS_TTL", default: 900, range: 60...86_400))
        refreshLifetime = .seconds(try reader.int("BFF_REFRESH_TTL", default: 2_592_000, range: 3_600...31_536_000))
        refreshReuseInterval = .seconds(try reader.int("BFF_REFRESH_REUSE_INTERVAL", default: 10, range: 0...300))
    }
}

/// A long-running process's settings (`bff serve`, `bff jobs work`): its drain, its job runtime and
/// its admin listener.
public struct ProcessConfiguration: Sendable {
    public var shutdownGrace: Duration
    /// The job runtime: `BFF_JOBS_*`; a concurrency of 0 runs no worker in `bff serve`.
    public var jobs: JobRuntimeConfiguration
    /// `BFF_ADMIN_PORT`/`BFF_ADMIN_HOST`: metrics and probes off the public port; nil with `off`.
    public var admin: AdminListener.Configuration?

    init(_ reader: EnvironmentReader) throws {
        // Longer than a tutoring turn may take (BFF_LLM_TOTAL_TIMEOUT, 60 s by default): a draining
        // server finishes the turns it accepted.
        shutdownGrace = .seconds(try reader.int("BFF_SHUTDOWN_GRACE", default: 75, range: 0...600))
        // Jobs get most of the grace to finish; the rest is for releasing those that did not.
        jobs = JobRuntimeConfiguration(
            concurrency: try reader.int("BFF_JOBS_CONCURRENCY", default: 10, range: 0...1_000),
            pollInterval: .milliseconds(try reader.int("BFF_JOBS_POLL_INTERVAL_MS", default: 1_000, range: 50...60_000)),
            lease: .seconds(try reader.int("BFF_JOBS_LEASE", default: 60, range: 5...3_600)),
            retention: try Self.jobRetention(reader),
            drain: shutdownGrace * 0.8)
        admin = try AdminListener.Configuration(reader)
    }

    /// `BFF_JOBS_RETENTION`, which `bff jobs run maintenance.purge` reads too.
    static func jobRetention(_ reader: EnvironmentReader) throws -> Duration {
        .seconds(try reader.int("BFF_JOBS_RETENTION", default: 604_800, range: 60...31_536_000))
    }

    /// `BFF_EVENT_LOOPS`: NIO's event loops, read by `bff` before anything starts them; nil: one
    /// per core. In a container the manifests set it from the CPU request, since a pod sees every
    /// core of its node.
    public static func eventLoops(environment: [String: String]) throws -> Int? {
        let reader = EnvironmentReader(environment)
        guard reader.optional("BFF_EVENT_LOOPS") != nil else { return nil }
        return try reader.int("BFF_EVENT_LOOPS", default: 1, range: 1...256)
    }
}

/// The capabilities that talk to outside services or run as jobs: the recalls' pushes, the LLM,
/// subscriptions. Each outside service is off when none of its variables is set (logged once at
/// start by `announce`); half of them set is a start-up error naming the missing one.
public struct FeatureConfiguration: Sendable {
    /// `BFF_RECALL_BASE_INTERVAL`: a first successful recall's interval (a day).
    public var recallBaseInterval: Duration
    /// `BFF_DEEP_LINK_BASE`: what a push's deep link starts with.
    public var deepLinkBase: String
    /// `BFF_PUSH_CONCURRENCY`: pushes in flight at once per process.
    public var pushConcurrency: Int
    /// The push services.
    public var push: PushConfiguration
    /// The tutoring turn's LLM (`BFF_LLM_*`); nil without `BFF_LLM_BASE_URL`.
    public var llm: LLMConfiguration?
    /// Subscriptions through RevenueCat (`BFF_REVENUECAT_*`, `BFF_IAP_*`).
    public var subscriptions: SubscriptionConfiguration
    /// What every outbound HTTPS client trusts (`BFF_OUTBOUND_CA_FILE`).
    public var outbound: OutboundHTTPConfiguration
    /// `BFF_STREAK_SWEEP_INTERVAL`: how often the learners whose streak breaks tonight are looked for.
    public var streakSweepInterval: Duration

    init(_ reader: EnvironmentReader) throws {
        recallBaseInterval = .seconds(try reader.int("BFF_RECALL_BASE_INTERVAL", default: 86_400, range: 1...31_536_000))
        deepLinkBase = reader.string("BFF_DEEP_LINK_BASE", default: "learnapp://")
        guard let scheme = deepLinkBase.split(separator: ":", maxSplits: 1).first, deepLinkBase.contains(":"),
            scheme.first?.isLetter == true, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
            deepLinkBase.hasSuffix("/")
        else {
            throw ConfigurationError("BFF_DEEP_LINK_BASE", "must be a URI prefix ending in / (learnapp:// or https://app.example.com/open/)")
        }
        // A learner's devices split between APNs and FCM: 128 keeps 64 or more in flight on each
        // service's HTTP/2 connection (the stand-ins count it in `scripts/bench push`), within FCM's
        // 100 streams a connection.
        pushConcurrency = try reader.int("BFF_PUSH_CONCURRENCY", default: 128, range: 1...10_000)
        push = try PushConfiguration(reader)
        llm = try LLMConfiguration(reader)
        subscriptions = try SubscriptionConfiguration(reader)
        outbound = try OutboundHTTPConfiguration(reader)
        streakSweepInterval = try Self.streakSweepInterval(reader)
    }

    /// `BFF_STREAK_SWEEP_INTERVAL`, which `bff jobs run achievements.streak_sweep` reads too. A
    /// learner is looked at within one interval of their window's evening part beginning.
    static func streakSweepInterval(_ reader: EnvironmentReader) throws -> Duration {
        .seconds(try reader.int("BFF_STREAK_SWEEP_INTERVAL", default: 900, range: 60...3_600))
    }

    /// One line per outside service that is off, so an operator sees at start what this process
    /// will not do; pushes only where jobs run (an API-only process sends none).
    func announce(_ logger: Logger, runsJobs: Bool) {
        if runsJobs, push.apns == nil, push.fcmCredentialsFile == nil, push.notificationHubs == nil {
            logger.warning(
                "push is off: no BFF_APNS_*, BFF_FCM_CREDENTIALS_FILE or BFF_PUSH_ROUTE=notification-hubs; due recalls wait in the queue until one is set")
        }
        if llm == nil {
            logger.warning("the LLM is off: no BFF_LLM_BASE_URL; tutoring turns answer 503 llm_unavailable")
        }
        if subscriptions.apiKey == nil {
            logger.warning("RevenueCat is off: no BFF_REVENUECAT_API_KEY; purchase verification answers 503 store_unavailable and re-syncs wait")
        }
    }
}

/// `bff jobs work`: the database, the process and the features whose jobs it runs; no OIDC client,
/// no signing keys.
public struct WorkerConfiguration: Sendable {
    public var base: BaseConfiguration
    public var process: ProcessConfiguration
    public var features: FeatureConfiguration

    public init(environment: [String: String]) throws {
        let reader = EnvironmentReader(environment)
        base = try BaseConfiguration(reader)
        process = try ProcessConfiguration(reader)
        features = try FeatureConfiguration(reader)
    }
}
