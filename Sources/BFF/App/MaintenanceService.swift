import Logging
import ServiceLifecycle

/// Housekeeping that keeps BFF-owned tables small, once a minute: expired rate-limit keys, logins,
/// remembered logout tokens, refresh tokens and their sessions, and idempotency keys.
struct MaintenanceService: Service {
    let dependencies: AppDependencies

    func run() async throws {
        let limiter = RateLimiter(database: dependencies.database)
        let identity = IdentityRepository(database: dependencies.database)
        // Cancellation ends the loop as well as a graceful shutdown: ServiceGroup cancels every service
        // when one fails (the port is taken, say), and a loop that swallowed it spun at full CPU, logging,
        // instead of letting the process exit.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                try await limiter.purgeExpired()
                try await identity.purgeExpiredLogins()
                try await identity.purgeSpentSessions()
                try await ChatCreation.purgeExpiredKeys(database: dependencies.database)
            } catch {
                if Task.isCancelled { return }
                dependencies.logger.notice("maintenance pass failed", metadata: ["error": .string(LoggableError.describe(error))])
            }
            do {
                try await gracefulShutdownAwareSleep(for: .seconds(60))
            } catch {
                return
            }
        }
    }
}

private func gracefulShutdownAwareSleep(for duration: Duration) async throws {
    try await cancelWhenGracefulShutdown {
        try await Task.sleep(for: duration)
    }
}
