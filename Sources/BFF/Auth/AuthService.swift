import BFFPlatform
import BFFWire
import Foundation
import Logging

/// A token pair as the contract returns it (docs/architecture.md#the-security-model).
struct TokenPair: Sendable, Equatable {
    let accessToken: String
    let expiresIn: Int
    let refreshToken: String
    let refreshExpiresIn: Int
    let user: UserRecord
}

/// Login, refresh, logout and revocation: the identity capability behind the auth operations.
struct AuthService: Sendable {
    let sessions: SessionIssuer
    /// `BFF_OIDC_REDIRECT_URIS`: where the IdP may send the learner back to.
    let redirectURIs: Set<String>
    let oidc: OIDCClient

    var identity: IdentityStore { sessions.identity }
    var refreshTokens: RefreshTokenStore { sessions.refreshTokens }
    var revokedSessions: RevokedSessions { sessions.revokedSessions }
    var logger: Logger { sessions.logger }
    static let loginLifetime: TimeInterval = 600

    static func validDeviceID(_ id: String) -> Bool {
        SafeIdentifier.isValid(id, length: 8...128)
    }

    static func requireDeviceID(_ id: String) throws {
        guard validDeviceID(id) else { throw AuthRefusal.invalid(field: "device_id", problem: .deviceIDShape) }
    }

    /// API-001: a one-time login holding the server's state and nonce and the app's PKCE challenge
    /// (the app keeps the verifier); the app opens the URL.
    func start(
        deviceID: String, redirectURI: String, codeChallenge: String, reauthenticate: Bool = false
    ) async throws -> (url: String, state: String, expiresAt: Date) {
        guard redirectURIs.contains(redirectURI) else {
            throw AuthRefusal.unregisteredRedirectURI
        }
        try Self.requireDeviceID(deviceID)
        guard PKCE.isChallenge(codeChallenge) else {
            throw AuthRefusal.invalid(field: "code_challenge", problem: .codeChallengeShape)
        }
        let state = SecureRandom.token()
        let login = PendingLogin(
            nonce: SecureRandom.token(), codeChallenge: codeChallenge, deviceID: deviceID, redirectURI: redirectURI, reauthenticate: reauthenticate)
        let url = try await mapIdPErrors {
            try await oidc.authorizationURL(
                redirectURI: redirectURI, state: state, nonce: login.nonce, codeChallenge: codeChallenge, reauthenticate: reauthenticate)
        }
        let expiresAt = try await identity.createLogin(state: state, login: login, lifetime: Self.loginLifetime)
        return (url, state, expiresAt)
    }

    /// API-002: consumes the login once, checks the app's PKCE verifier against its challenge,
    /// exchanges the code passing that verifier, verifies the ID token, and signs the user in.
    func callback(code: String, state: String, codeVerifier: String?) async throws -> TokenPair {
        // Checked before the login is used up: a malformed code must not cost the learner their login.
        guard (1...2048).contains(code.utf8.count), code.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw AuthRefusal.invalid(field: "code", problem: .authorizationCodeShape)
        }
        guard (1...256).contains(state.utf8.count), state.utf8.allSatisfy(Base64URL.isAlphabet) else {
            throw AuthRefusal.invalid(field: "state", problem: .stateShape)
        }
        guard let login = try await identity.consumeLogin(state: state) else {
            throw AuthRefusal.unknownLogin
        }
        // After the login is used up: whoever holds the redirect's code and state but not the
        // verifier gets one try, which also ends the login for everyone.
        guard let codeVerifier, PKCE.verifier(codeVerifier, matches: login.codeChallenge) else {
            logger.notice("security: login refused, the PKCE verifier is missing or wrong", metadata: ["event": "pkce_mismatch"])
            throw AuthRefusal.verifierMismatch
        }
        let claims = try await mapIdPErrors {
            let idToken = try await oidc.exchange(code: code, redirectURI: login.redirectURI, codeVerifier: codeVerifier)
            return try await oidc.verifyIDToken(idToken, nonce: login.nonce)
        }
        let user = try await identity.upsertUser(
            issuer: oidc.issuer, subject: claims.sub.value,
            email: Self.profileText(claims.email, limit: 320, shorten: false),
            displayName: Self.profileText(claims.name, limit: 200, shorten: true))
        try await sessions.signIn(user.id, on: login.deviceID)
        let authTime = Self.freshAuthTime(claims.authTime, login: login)
        if authTime == nil, login.reauthenticate {
            logger.warning(
                "the IdP answered a reauthentication without a fresh auth_time; the session does not count as a fresh login",
                metadata: ["event": "reauthentication_not_fresh"])
        }
        let refresh = try await refreshTokens.startFamily(userID: user.id, deviceID: login.deviceID, idpSessionID: claims.sid, authTime: authTime)
        logger.info("login", metadata: ["user_id": .string(user.id.uuidString), "family_id": .string(refresh.familyID.uuidString)])
        return sessions.pair(for: refresh, user: user)
    }

    /// The learner's authentication time for this login, as the session keeps it: the IdP's
    /// `auth_time`, never later than now (a clock ahead at the IdP must not make a login look
    /// fresher), and nil when it is missing or older than the login's start less a minute of skew,
    /// so that only an authentication made for this login ever counts as fresh.
    static func freshAuthTime(_ claimed: Double?, login: PendingLogin, now: Date = Date()) -> Date? {
        guard let claimed, let startedAt = login.startedAt else { return nil }
        let authTime = min(Date(timeIntervalSince1970: claimed), now)
        return authTime >= startedAt.addingTimeInterval(-60) ? authTime : nil
    }

    /// Profile claims are the learner's own text at the IdP and must not fail a login: trimmed, no
    /// NUL (PostgreSQL stores none), empty → absent, and longer than the column (code points, as its
    /// CHECK counts) → shortened at a character boundary, or absent where a prefix would be wrong.
    static func profileText(_ value: String?, limit: Int, shorten: Bool) -> String? {
        guard let value else { return nil }
        let text = value.replacingOccurrences(of: "\0", with: "").trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return nil }
        if text.unicodeScalars.count <= limit { return text }
        guard shorten else { return nil }
        var kept = ""
        var scalars = 0
        for character in text {
            scalars += character.unicodeScalars.count
            if scalars > limit { break }
            kept.append(character)
        }
        return kept.isEmpty ? nil : kept
    }

    /// API-003: one-time rotation, rate limited per family (not per address: see `RotateRefreshToken`).
    func refresh(token: String, deviceID: String) async throws -> TokenPair {
        guard token.utf8.count == 43, token.utf8.allSatisfy(Base64URL.isAlphabet) else {
            throw AuthRefusal.invalid(field: "refresh_token", problem: .refreshTokenShape)
        }
        try Self.requireDeviceID(deviceID)
        // The contract's pattern allows a last character with unused bits set, which no token this
        // service issued has: such a token is unknown, not malformed.
        guard Base64URL.decode(token)?.count == 32 else { throw RefreshRefusal.unknown }
        let rotated: RotatedRefreshToken
        do {
            rotated = try await refreshTokens.rotate(token, deviceID: deviceID, familyRate: 10, familyPeriod: .seconds(60))
        } catch let refusal as RefreshRefusal {
            if let family = refusal.revokedFamily { revokedSessions.record([family]) }
            throw refusal
        }
        return sessions.pair(for: rotated.token, user: rotated.user)
    }

    /// Ends the principal's session. Like every revocation this replica makes, it is recorded in
    /// `revokedSessions` at once, so the session's access tokens stop working here without waiting
    /// for the next poll. The web's session is the web's to end (Auth.js's `signOut` clears its
    /// cookie): it has no family or device here, and its logout changes nothing.
    func logout(_ principal: Principal) async throws {
        guard case .app(let deviceID, let familyID) = principal.session else { return }
        try await identity.logout(userID: principal.userID, familyID: familyID, deviceID: deviceID)
        revokedSessions.record([familyID])
    }

    /// A lost-device report: revokes the user's sessions on the device; false when the user has no
    /// such device.
    func reportLost(deviceID: String, of userID: UUID) async throws -> Bool {
        guard let revoked = try await identity.removeDevice(userID: userID, deviceID: deviceID) else { return false }
        revokedSessions.record(revoked)
        return true
    }

    /// Back-channel logout: the IdP ended a session (by `sid`) or all of a user's sessions (by `sub`).
    /// A replay changes nothing and is answered like the first delivery, which a provider may retry
    /// when it missed our answer.
    func backchannelLogout(_ logoutToken: String) async throws {
        let claims = try await mapIdPErrors(
            refused: "back-channel logout token refused",
            as: .logoutTokenRejected
        ) {
            try await oidc.verifyLogoutToken(logoutToken)
        }
        let revoked = try await identity.backchannelLogout(
            issuer: oidc.issuer, jti: claims.jti.value, issuedAt: claims.iat.value,
            keepUntil: claims.iat.value.addingTimeInterval(OIDCClient.logoutTokenMaxAge + OIDCClient.leeway),
            subject: claims.sub?.value, idpSessionID: claims.sid)
        if let revoked {
            revokedSessions.record(revoked)
            logger.info("back-channel logout", metadata: ["families_revoked": .stringConvertible(revoked.count)])
        } else {
            logger.info("back-channel logout token already acted on")
        }
    }

    private func mapIdPErrors<T>(
        refused: Logger.Message = "identity provider refused the login",
        as rejection: AuthRefusal = .loginRejected,
        _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch let error as IdPRejected {
            logger.notice(refused, metadata: ["reason": .string(error.reason)])
            throw rejection
        } catch let error as IdPUnavailable {
            logger.warning("identity provider unavailable", metadata: ["reason": .string(error.reason)])
            throw AuthRefusal.idpUnavailable
        }
    }
}
