import BFFPlatform
import Foundation
import Metrics
import NIOConcurrencyHelpers

/// Refresh families revoked recently enough that an AppJWT of theirs may not have expired yet.
///
/// An AppJWT is verified without the database, so on its own a revoked family's access tokens would
/// stay valid until they expire: a lost phone could keep reading chats for 15 minutes after the
/// report. Authentication refuses a token whose `sid` is in this set. `RevocationWatcher` replaces
/// the database's part of it at every poll (revocations made by other replicas and operators);
/// this process's own revocations are recorded at once (`AuthService`).
public final class RevokedSessions: Sendable {
    private struct State {
        /// What the last poll read: every family revoked within `retention` of it.
        var polled: Set<UUID> = []
        /// Revoked by this process (this clock), until `retention` has passed.
        var recorded: [UUID: Date] = [:]
    }

    /// How long a family is kept after its revocation: the longest an AppJWT issued before it can
    /// live, plus a margin for the clocks of this process, the database and the other replicas.
    let retention: TimeInterval
    private let state = NIOLockedValueBox(State())
    private let held = Gauge(label: "bff_revoked_sessions_held")

    init(accessTokenLifetime: Duration) {
        retention = TimeInterval(accessTokenLifetime.components.seconds) + 2 * AccessTokens.leeway
    }

    /// Whether the family was revoked; runs on every authenticated request.
    func contains(_ family: UUID) -> Bool {
        state.withLockedValue { $0.polled.contains(family) || (!$0.recorded.isEmpty && $0.recorded[family] != nil) }
    }

    /// Families this process has just revoked.
    func record(_ families: some Sequence<UUID>, at now: Date = Date()) {
        let count = state.withLockedValue { state in
            for family in families { state.recorded[family] = now }
            return state.polled.count + state.recorded.count
        }
        held.record(count)
    }

    /// Replaces what the previous poll read. The set is built before the lock is taken, so a large
    /// one does not hold up the requests checking tokens meanwhile.
    func replacePolled(with families: [UUID], now: Date = Date()) {
        let polled = Set(families)
        let horizon = now.addingTimeInterval(-retention)
        let count = state.withLockedValue { state in
            state.polled = polled
            if !state.recorded.isEmpty { state.recorded = state.recorded.filter { $0.value >= horizon } }
            return state.polled.count + state.recorded.count
        }
        held.record(count)
    }
}
