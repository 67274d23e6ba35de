import Foundation
import Logging
import Metrics
import ServiceLifecycle

/// Keeps `RevokedSessions` current: every `BFF_REVOCATION_POLL_INTERVAL` seconds it reads the
/// families revoked since the last read, whoever revoked them (another replica, reuse detection in
/// the refresh statement, back-channel logout, an operator command, the web product).
///
/// While the database cannot be read, the set keeps what it had: a revocation made meanwhile takes
/// effect at the first poll that succeeds, and the token expires in any case.
struct RevocationWatcher: Service {
    let revoked: RevokedSessions
    let identity: IdentityRepository
    let interval: Duration
    let logger: Logger
    private let failures = Counter(label: "bff_revocation_poll_failures_total")

    /// How far each poll reaches back before the previous one. A revocation is stamped with its
    /// transaction's start and seen only once committed; the revoking transactions are a few short
    /// statements, each bounded by `BFF_DATABASE_TIMEOUT` (at most 120 s).
    static let overlap: TimeInterval = 300

    init(dependencies: AppDependencies) {
        revoked = dependencies.revokedSessions
        identity = IdentityRepository(database: dependencies.database)
        interval = .seconds(dependencies.configuration.revocationPollInterval)
        logger = dependencies.logger
    }

    /// One read; throws when the database cannot be read.
    func poll() async throws {
        let (polledAt, families) = try await identity.revocations(
            since: revoked.nextPollStart(overlap: Self.overlap), window: revoked.retention)
        revoked.merge(families, polledAt: polledAt)
    }

    func run() async throws {
        var failing = false
        // Ends on cancellation as well as on a graceful shutdown (see MaintenanceService).
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
            do {
                try await poll()
                if failing {
                    failing = false
                    logger.notice("revocation poll recovered")
                }
            } catch {
                if Task.isCancelled { return }
                failures.increment()
                // Once per outage, not every few seconds: the pool already logs the outage itself.
                if !failing {
                    failing = true
                    logger.warning("revocation poll failed; revoked sessions are refused again once it succeeds",
                                   metadata: ["error": .string(LoggableError.describe(error))])
                }
            }
        }
    }
}
