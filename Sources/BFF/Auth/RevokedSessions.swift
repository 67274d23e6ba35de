import Foundation
import Metrics
import NIOConcurrencyHelpers

/// Refresh families revoked recently enough that an AppJWT of theirs may not have expired yet.
///
/// An AppJWT is verified without the database, so on its own a revoked family's access tokens would
/// stay valid until they expire: a lost phone could keep reading chats for 15 minutes after the
/// report. Authentication refuses a token whose `sid` is in this set. `RevocationWatcher` fills it
/// from the database (revocations made by other replicas, operators, reuse detection inside the
/// refresh statement); this process's own revocations are recorded at once.
public final class RevokedSessions: Sendable {
    private struct State {
        /// Family id → when it was revoked.
        var families: [UUID: Date] = [:]
        /// The database's clock at the last poll that succeeded.
        var polledAt: Date?
    }

    /// How long a family is kept after its revocation: the longest an AppJWT issued before it can
    /// live, plus a margin for the clocks of this process, the database and the other replicas.
    let retention: TimeInterval
    private let state = NIOLockedValueBox(State())
    private let held = Gauge(label: "bff_revoked_sessions_held")

    init(accessTokenLifetime: Int) {
        retention = TimeInterval(accessTokenLifetime) + 2 * AccessTokens.leeway
    }

    /// Whether the family was revoked; runs on every authenticated request.
    func contains(_ family: UUID) -> Bool {
        state.withLockedValue { $0.families.isEmpty ? false : $0.families[family] != nil }
    }

    /// Families this process has just revoked.
    func record(_ families: some Sequence<UUID>, at revokedAt: Date = Date()) {
        let count = state.withLockedValue { state in
            for family in families where state.families[family] == nil { state.families[family] = revokedAt }
            return state.families.count
        }
        held.record(count)
    }

    /// Where the next poll starts: revocations after this instant (the database's clock), or nil for
    /// the whole retention window. The next poll reaches back `overlap` before the last one, so a
    /// revocation committed after that poll read, but stamped before it (`now()` is its
    /// transaction's start), is still found.
    func nextPollStart(overlap: TimeInterval) -> Date? {
        state.withLockedValue { $0.polledAt.map { $0.addingTimeInterval(-overlap) } }
    }

    /// Merges a poll's result and forgets the families revoked longer than `retention` before it.
    func merge(_ revoked: [(UUID, Date)], polledAt: Date) {
        let count = state.withLockedValue { state in
            for (family, revokedAt) in revoked { state.families[family] = revokedAt }
            let horizon = polledAt.addingTimeInterval(-retention)
            state.families = state.families.filter { $0.value >= horizon }
            state.polledAt = max(state.polledAt ?? polledAt, polledAt)
            return state.families.count
        }
        held.record(count)
    }

    var count: Int { state.withLockedValue { $0.families.count } }
}
