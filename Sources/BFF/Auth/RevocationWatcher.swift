import BFFPlatform
import Foundation
import Logging
import Metrics
import ServiceLifecycle

/// Keeps `RevokedSessions` current: every `BFF_REVOCATION_POLL_INTERVAL` seconds it reads the
/// families revoked within the retention window, whoever revoked them (another replica, reuse
/// detection in the refresh statement, back-channel logout, an operator command, the web product),
/// and the identities revoked user-wide within theirs (an operator command, an account deletion).
///
/// Each poll reads the whole window rather than what is new since the last one. A revocation is
/// stamped with its transaction's start but seen only once committed, and that can be much later
/// (a lock wait, an operator's open transaction); a poll that started from the previous one's time
/// would miss it for good.
///
/// While the database cannot be read, the set keeps what it had: a revocation made meanwhile takes
/// effect at the first poll that succeeds, and the token expires in any case.
struct RevocationWatcher: Service {
    let revoked: RevokedSessions
    let identity: IdentityStore
    let interval: Duration
    let logger: Logger
    private let failures = Counter(label: "bff_revocation_poll_failures_total")

    init(dependencies: AppDependencies) {
        revoked = dependencies.revokedSessions
        identity = dependencies.base.identity
        interval = dependencies.configuration.revocationPollInterval
        logger = dependencies.logger
    }

    /// One read of the revoked families and of the identities revoked user-wide (the web's cookies);
    /// throws when the database cannot be read.
    func poll() async throws {
        let families = try await identity.revokedFamilies(within: revoked.retention)
        let identities = try await identity.revokedIdentities(within: revoked.identityRetention)
        revoked.replacePolled(with: families, identities: identities)
    }

    func run() async throws {
        var failing = false
        // Ends on cancellation as well as on a graceful shutdown: ServiceGroup cancels every service
        // when one fails (the port is taken, say), and a loop that swallowed that would spin instead
        // of letting the process exit.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                try await gracefulShutdownAwareSleep(for: interval)
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
                    logger.warning(
                        "revocation poll failed; sessions revoked from now on are not refused until a poll succeeds",
                        metadata: ["error": .string(LoggableError.describe(error))])
                }
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
