import BFFPlatform
import BFFWire
import Foundation
import Logging

/// What puts a session in a learner's name: the device claim and the token pair. The sign-in flow
/// uses it after the IdP's answer, and `bff auth issue` on its own, with the database and the
/// signing keys alone.
struct SessionIssuer: Sendable {
    let identity: IdentityStore
    let refreshTokens: RefreshTokenStore
    let accessTokens: AccessTokens
    let revokedSessions: RevokedSessions
    let logger: Logger

    init(_ base: BaseServices, tokens: TokenConfiguration, accessTokens: AccessTokens, revokedSessions: RevokedSessions, logger: Logger) {
        identity = base.identity
        refreshTokens = RefreshTokenStore(
            database: base.database, keyRing: tokens.jwtKeys, lifetime: tokens.refreshLifetime, reuseInterval: tokens.refreshReuseInterval, logger: logger)
        self.accessTokens = accessTokens
        self.revokedSessions = revokedSessions
        self.logger = logger
    }

    /// Puts the device in `userID`'s name: one device, one account. Another account's sessions and
    /// push tokens on it end here, so that the learner who signed in before cannot be reached
    /// through it, nor keep a session on a device now in someone else's hands.
    func signIn(_ userID: UUID, on deviceID: String) async throws {
        let takenOver = try await identity.claimDevice(userID: userID, deviceID: deviceID)
        guard !takenOver.families.isEmpty || !takenOver.previousUsers.isEmpty else { return }
        revokedSessions.record(takenOver.families)
        logger.warning(
            "security: device moved to another account; the previous account's sessions on it ended",
            metadata: [
                "event": "device_taken_over",
                "user_id": .string(userID.uuidString),
                "previous_user_ids": .array(takenOver.previousUsers.map { .string($0.uuidString) }),
                "families_revoked": .stringConvertible(takenOver.families.count),
            ])
    }

    /// The AppJWT is derived from the refresh token it comes with (its `jti` and `iat`), so a replayed
    /// rotation returns byte-identical tokens.
    func pair(for refresh: IssuedRefreshToken, user: UserRecord) -> TokenPair {
        let tokenID = String(Base64URL.encode(Digest.sha256(refresh.token)).prefix(22))
        let access = accessTokens.issue(
            userID: user.id, deviceID: refresh.deviceID, familyID: refresh.familyID, scopes: refresh.scopes,
            tokenID: tokenID, issuedAt: refresh.issuedAt)
        let now = Date()
        let accessLeft = Int(refresh.issuedAt.timeIntervalSince1970.rounded(.down)) + accessTokens.lifetime - Int(now.timeIntervalSince1970)
        return TokenPair(
            accessToken: access, expiresIn: max(0, accessLeft), refreshToken: refresh.token,
            refreshExpiresIn: max(0, Int(refresh.expiresAt.timeIntervalSince(now))), user: user)
    }
}
