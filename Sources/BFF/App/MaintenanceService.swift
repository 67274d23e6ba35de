import Logging
import ServiceLifecycle

/// Housekeeping that keeps BFF-owned tables small, once a minute: expired rate-limit keys, logins,
/// remembered logout tokens, refresh tokens and their sessions, and idempotency keys.
struct MaintenanceService: Service {
    let dependencies: AppDependencies
    /// Opened when start-up has found the database reachable and its schema this build's. Services
    /// start together with those checks, and a purge written for this schema must not run on an
    /// older one (a new build rolled out before `bff migrate`), nor a first pass hit a dead database.
    let started: StartupGate

    func run() async throws {
        await cancelWhenGracefulShutdown { await started.wait() }
        let limiter = RateLimiter(database: dependencies.database)
        let identity = IdentityRepository(database: dependencies.database)
        // Each purge on its own: one that fails (its table locked by a migration, say) must not
        // stop the others.
        let purges: [(String, @Sendable () async throws -> Void)] = [
            ("rate limits", limiter.purgeExpired),
            ("logins", identity.purgeExpiredLogins),
            ("logout tokens", identity.purgeExpiredLogoutTokens),
            ("refresh tokens", { try await identity.purgeSpentSessions() }),
            ("idempotency keys", { [database = dependencies.database] in try await ChatCreation.purgeExpiredKeys(database: database) }),
        ]
        // Cancellation ends the loop as well as a graceful shutdown: ServiceGroup cancels every service
        // when one fails (the port is taken, say), and a loop that swallowed it spun at full CPU, logging,
        // instead of letting the process exit.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            for (name, purge) in purges {
                do {
                    try await purge()
                } catch {
                    if Task.isCancelled { return }
                    dependencies.logger.notice(
                        "maintenance purge failed",
                        metadata: [
                            "purge": .string(name), "error": .string(LoggableError.describe(error)),
                        ])
                }
            }
            do {
                try await gracefulShutdownAwareSleep(for: .seconds(60))
            } catch {
                return
            }
        }
    }
}

/// Sleeps, and ends early with an error at a graceful shutdown or cancellation.
func gracefulShutdownAwareSleep(for duration: Duration) async throws {
    try await cancelWhenGracefulShutdown {
        try await Task.sleep(for: duration)
    }
}
