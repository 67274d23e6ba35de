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
///
/// The web's session cookie belongs to no family: a user-wide revocation (an operator's, an account
/// deletion) is kept here as well, by the user's IdP identity (`IdentityStore.identityKey`) and
/// when it happened, and a cookie issued before it is refused (`WebSessions`).
public final class RevokedSessions: Sendable {
    private struct State {
        /// What the last poll read: every family revoked within `retention` of it.
        var polled: Set<UUID> = []
        /// Revoked by this process (this clock), until `retention` has passed.
        var recorded: [UUID: Date] = [:]
        /// Identities revoked within `identityRetention` of the last poll, and when (the database's clock).
        var polledIdentities: [Data: Date] = [:]
        /// Identities revoked by this process, until `identityRetention` has passed.
        var recordedIdentities: [Data: Date] = [:]
    }

    /// How long a family is kept after its revocation: the longest an AppJWT issued before it can
    /// live, plus a margin for the clocks of this process, the database and the other replicas.
    let retention: TimeInterval
    /// The same for an identity: the longest the web's cookie is accepted after its `iat`.
    let identityRetention = WebSessions.maximumAge + 2 * AccessTokens.leeway
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

    /// When the user of `identity` was last revoked user-wide, if within `identityRetention`; runs
    /// on every request authenticated by the web's cookie.
    func revocation(of identity: Data) -> Date? {
        state.withLockedValue { (state: inout State) -> Date? in
            guard !state.polledIdentities.isEmpty || !state.recordedIdentities.isEmpty else { return nil }
            switch (state.polledIdentities[identity], state.recordedIdentities[identity]) {
            case (let polled?, let recorded?): return max(polled, recorded)
            case (let polled?, nil): return polled
            case (nil, let recorded?): return recorded
            case (nil, nil): return nil
            }
        }
    }

    /// A user-wide revocation this process has just made, at `revokedAt` (the database's time).
    func record(identity: Data, revokedAt: Date) {
        state.withLockedValue { $0.recordedIdentities[identity] = revokedAt }
    }

    /// Replaces what the previous poll read. The sets are built before the lock is taken, so a large
    /// one does not hold up the requests checking tokens meanwhile.
    func replacePolled(with families: [UUID], identities: [(key: Data, revokedAt: Date)] = [], now: Date = Date()) {
        let polled = Set(families)
        let polledIdentities = Dictionary(identities.map { ($0.key, $0.revokedAt) }, uniquingKeysWith: { max($0, $1) })
        let horizon = now.addingTimeInterval(-retention)
        let identityHorizon = now.addingTimeInterval(-identityRetention)
        let count = state.withLockedValue { state in
            state.polled = polled
            state.polledIdentities = polledIdentities
            if !state.recorded.isEmpty { state.recorded = state.recorded.filter { $0.value >= horizon } }
            if !state.recordedIdentities.isEmpty { state.recordedIdentities = state.recordedIdentities.filter { $0.value >= identityHorizon } }
            return state.polled.count + state.recorded.count
        }
        held.record(count)
    }
}
