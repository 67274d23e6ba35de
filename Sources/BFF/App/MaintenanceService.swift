import Logging
import ServiceLifecycle

/// Housekeeping that keeps BFF-owned tables small: expired rate-limit keys and logins, once a minute.
struct MaintenanceService: Service {
    let dependencies: AppDependencies

    func run() async throws {
        let limiter = RateLimiter(database: dependencies.database)
        let identity = IdentityRepository(database: dependencies.database)
        while !Task.isShuttingDownGracefully {
            do {
                try await limiter.purgeExpired()
                try await identity.purgeExpiredLogins()
            } catch {
                dependencies.logger.notice("maintenance pass failed", metadata: ["error": .string("\(error)")])
            }
            try? await gracefulShutdownAwareSleep(for: .seconds(60))
        }
    }
}

private func gracefulShutdownAwareSleep(for duration: Duration) async throws {
    try await cancelWhenGracefulShutdown {
        try await Task.sleep(for: duration)
    }
}
