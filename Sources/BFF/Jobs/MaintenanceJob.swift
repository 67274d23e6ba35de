import BFFJobs
import BFFPlatform
import Logging

/// Housekeeping that keeps BFF-owned tables small, once a minute across all replicas: expired
/// rate-limit keys, logins, remembered logout tokens, refresh tokens and their sessions, idempotency
/// keys, user-wide revocations no cookie can outlive, and finished jobs past their retention.
enum MaintenanceJob {
    static let kind = "maintenance.purge"

    static func periodic(_ base: BaseServices, retention: Duration) -> PeriodicJob {
        let database = base.database
        let limiter = base.limiter
        let identity = base.identity
        let jobs = JobStore(database: database)
        let logger = base.logger
        // Each purge on its own: one that fails (its table locked by a migration, say) must not stop
        // the others; the run fails afterwards, so the failure is on the job's record too.
        let purges: [(String, @Sendable () async throws -> Void)] = [
            ("rate limits", limiter.purgeExpired),
            ("logins", identity.purgeExpiredLogins),
            ("logout tokens", identity.purgeExpiredLogoutTokens),
            ("refresh tokens", { try await identity.purgeSpentSessions() }),
            ("idempotency keys", { try await IdempotencyStore.purgeExpired(database: database) }),
            ("deleted accounts' sessions", { try await AccountDeletion.purgeDeletedSessions(database: database) }),
            ("user-wide revocations", identity.purgeExpiredIdentityRevocations),
            ("finished jobs", { _ = try await jobs.purgeFinished(olderThan: retention) }),
        ]
        return PeriodicJob(
            every: .seconds(60),
            handler: JobHandler(kind: kind, concurrency: 1) { _ in
                var failed: [String] = []
                for (name, purge) in purges {
                    do {
                        try await purge()
                    } catch {
                        if Task.isCancelled { throw CancellationError() }
                        failed.append(name)
                        logger.notice("maintenance purge failed", metadata: ["purge": .string(name), "error": .string(LoggableError.describe(error))])
                    }
                }
                if !failed.isEmpty { throw JobFailure.retry("purges failed: \(failed.joined(separator: ", "))", after: nil) }
            })
    }
}
