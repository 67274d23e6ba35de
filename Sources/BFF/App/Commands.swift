import BFFJobs
import BFFPlatform
import Foundation
import Hummingbird
import Logging
import NIOPosix
import PostgresNIO
import ServiceLifecycle

/// What the `bff` subcommands do; the executable only parses arguments and calls these.
public enum Commands {
    /// Runs the HTTP server until SIGTERM/SIGINT, then drains in-flight requests for up to
    /// `BFF_SHUTDOWN_GRACE` seconds and closes the pool.
    public static func serve(environment: [String: String]) async throws {
        let configuration = try AppConfiguration(environment: environment)
        let logger = makeLogger(level: configuration.logLevel)
        // Before the dependencies: their clients and the router see the process's tracer and metrics.
        let telemetry = try Telemetry.start(environment: environment, logger: logger)
        let dependencies = try await AppDependencies(configuration: configuration, logger: logger)
        configuration.features.announce(logger, runsJobs: configuration.process.jobs.concurrency > 0)
        if configuration.webSession.secrets.isEmpty {
            logger.info("the web session is off: no BFF_WEB_AUTH_SECRET; the web's Auth.js cookie is not read")
        } else if configuration.webSession.insecureCookie {
            logger.warning("BFF_WEB_AUTH_INSECURE_COOKIE is true: the web's session is read from authjs.session-token, a plain-http development cookie")
        }
        let app = try buildApplication(dependencies)
        // Stopped in reverse order: the drain's clock starts first, the exporter outlives the
        // server's drain and sends its spans. What still waits on the LLM after 80 % of the grace
        // is answered then (the jobs' drain uses the same share).
        let clock = DrainDeadline.Clock(deadline: dependencies.drain, after: configuration.shutdownGrace * 0.8, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: telemetry + [app, clock],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ).withShutdownGrace(configuration.shutdownGrace))
        // `bff` runs Swift's tasks on the event loops (EventLoopGlobalExecutor); where it could not,
        // requests hop threads at every await and the server is markedly slower.
        let onLoops = MultiThreadedEventLoopGroup.currentEventLoop != nil
        if !onLoops {
            logger.warning("Swift tasks run on the default thread pool, not on the event loops: expect lower throughput")
        }
        logger.info(
            "starting",
            metadata: [
                "address": .string("\(configuration.httpHost):\(configuration.httpPort)"),
                "version": .string(BuildInfo.version),
                "commit": .string(BuildInfo.commit),
                "executor": .string(onLoops ? "event-loops" : "swift-default"),
            ])
        try await group.run()
        logger.info("stopped")
    }

    /// Applies pending migrations and returns the versions applied. Reads only `BFF_DATABASE_URL`
    /// and the base settings: the migrate Job gets no other secret.
    public static func migrate(environment: [String: String]) async throws -> [Int] {
        let base = try operatorServices(environment: environment, quiet: false)
        return try await withDatabase(base.database) { client in
            try await base.database.waitUntilReachable(base.configuration.database)
            return try await base.migrator.migrate(client: client)
        }
    }

    /// The database and migrations, for the commands that need nothing else; `quiet` ones log only
    /// warnings, to stderr, since their stdout is their answer.
    static func operatorServices(environment: [String: String], quiet: Bool = true) throws -> BaseServices {
        let configuration = try BaseConfiguration(environment: environment)
        return try BaseServices(configuration: configuration, logger: operatorLogger(configuration, quiet: quiet))
    }

    /// The database alone: the queue's and the sessions' tools work wherever they are run, with or
    /// without the migrations' folder.
    static func operatorDatabase(environment: [String: String]) throws -> Database {
        Observability.bootstrap()
        let configuration = try BaseConfiguration(environment: environment)
        return Database(configuration, logger: operatorLogger(configuration, quiet: true))
    }

    private static func operatorLogger(_ configuration: BaseConfiguration, quiet: Bool) -> Logger {
        quiet ? makeLogger(level: .warning, sink: .standardError) : makeLogger(level: configuration.logLevel)
    }

    /// Runs `body` with all of the database's pools running, then shuts them down.
    public static func withDatabase<Result: Sendable>(
        _ database: Database, _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        try await withRunning(database.clients) { try await body(database.client) }
    }

    /// Runs `body` with the client's pool running, then shuts the pool down.
    public static func withDatabase<Result: Sendable>(
        _ client: PostgresClient, _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        try await withRunning([client]) { try await body(client) }
    }

    private static func withRunning<Result: Sendable>(
        _ clients: [PostgresClient], _ body: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Result?.self) { group in
            // A lease taken before `run()` has begun still works, but postgres-nio logs a warning
            // for it, which every `bff migrate` printed. Each task signals just before it enters
            // `run()`, which marks the client running before its first suspension. A task the
            // system preempts between the two lets the body lease first (one in a few hundred
            // under a loaded test run), so the body also waits 10 ms, longer than a time slice; a
            // command pays that once. Losing anyway costs only the warning.
            let (entering, signal) = AsyncStream.makeStream(of: Void.self)
            for client in clients {
                group.addTask {
                    signal.yield()
                    await client.run()
                    return nil
                }
            }
            defer { group.cancelAll() }
            var waiting = clients.count
            for await _ in entering {
                waiting -= 1
                if waiting == 0 { break }
            }
            try await Task.sleep(for: .milliseconds(10))
            return try await body()
        }
    }
}

extension ServiceGroupConfiguration {
    func withShutdownGrace(_ grace: Duration) -> Self {
        var copy = self
        copy.maximumGracefulShutdownDuration = grace
        copy.maximumCancellationDuration = .seconds(5)
        return copy
    }
}
