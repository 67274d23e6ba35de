import BFFPlatform
import Foundation
import Hummingbird

/// The web's Next.js + Auth.js login as a credential of `/api/v1` (docs/web-session.md): the
/// Auth.js v5 session cookie the browser sends to the web's own origin, which routes `/api/v1/*`
/// here. The token is opened by `AuthJSSessionToken`; this decides whose it is.
///
/// Auth.js's `sub` is an id of its own. The web's `jwt` callback writes the IdP's issuer and
/// subject (`idp_iss`, `idp_sub`) at sign-in, and they map to the user exactly as the app's login
/// does (`IdentityStore.upsertUser`), the user being made on first sight. A cookie of another
/// issuer than `BFF_OIDC_ISSUER`, or without them, is invalid. The mapping is kept in memory
/// (`WebSessionUsers`), so that in the steady state a cookie costs no database round trip.
///
/// A web session has no device and no refresh family: it is refused after a user-wide revocation
/// (`RevokedSessions.revocation(of:)`) when it was issued before it, and it carries the scopes
/// below, without `push:register`, which only a device has.
final class WebSessions: Sendable {
    /// The longest a cookie is accepted after its `iat`, whatever its `exp`: Auth.js's default
    /// `maxAge`. User-wide revocations are kept this long (`RevokedSessions.identityRetention`).
    static let maximumAge: TimeInterval = 30 * 86_400
    /// What a web session may do.
    static let scope = "profile:read chat:rw iap:verify"

    /// A cookie whose token opened and whose claims name a user of this IdP; no database was asked.
    struct Verified: Sendable, Equatable {
        let subject: String
        let email: String?
        let name: String?
        let issuedAt: Date
        let authTime: Date?
        let tokenID: String
        /// When the user was last revoked user-wide, before this cookie was issued.
        let revokedAt: Date?
    }

    let cookieName: String
    private let reader: AuthJSSessionToken
    /// `BFF_OIDC_ISSUER`, as users are keyed by it (`OIDCClient.issuer`).
    private let issuer: String
    private let identity: IdentityStore
    private let revoked: RevokedSessions
    private let users = WebSessionUsers()

    /// Nil without a secret: then the cookie is not read at all, and a request with it alone is anonymous.
    init?(configuration: WebSessionConfiguration, issuer: String, identity: IdentityStore, revoked: RevokedSessions) {
        guard !configuration.secrets.isEmpty else { return nil }
        cookieName = configuration.cookieName
        reader = AuthJSSessionToken(secrets: configuration.secrets, salt: configuration.cookieName)
        self.issuer = issuer
        self.identity = identity
        self.revoked = revoked
    }

    /// The token the cookies carry under `name`, as Auth.js's `SessionStore` writes it: the cookie
    /// itself, or, when it is too large for one, `name.0`, `name.1`, … joined in order, up to the
    /// first missing one. Nil when there is none, or it is empty.
    static func token(in cookies: Cookies, named name: String) -> String? {
        if let whole = cookies[name]?.value {
            return whole.isEmpty ? nil : whole
        }
        var joined = ""
        var index = 0
        while let chunk = cookies["\(name).\(index)"]?.value, !chunk.isEmpty {
            joined += chunk
            index += 1
            // More than the longest token there can be: the rest is not read.
            if joined.utf8.count > AuthJSSessionToken.maximumLength { break }
        }
        return joined.isEmpty ? nil : joined
    }

    /// The session `token` is at `now`, or nil when it is not one: unreadable, expired, older than
    /// `maximumAge`, of another IdP, without the IdP's subject, or issued before its user's revocation.
    func verify(_ token: String, now: Date = Date()) -> Verified? {
        guard let claims = try? reader.claims(of: token, now: now),
            now.timeIntervalSince1970 - claims.iat < Self.maximumAge,
            let idpIssuer = claims.idpIssuer, OIDCClient.withoutTrailingSlashes(idpIssuer) == issuer,
            let subject = claims.idpSubject, Self.isSubject(subject)
        else { return nil }
        let revokedAt = revoked.revocation(of: IdentityStore.identityKey(issuer: issuer, subject: subject))
        if let revokedAt, claims.iat < revokedAt.timeIntervalSince1970 { return nil }
        return Verified(
            subject: subject, email: claims.email, name: claims.name, issuedAt: Date(timeIntervalSince1970: claims.iat),
            authTime: claims.authTime.map { Date(timeIntervalSince1970: $0) }, tokenID: claims.jti ?? "", revokedAt: revokedAt)
    }

    /// The principal of a verified session: its user from memory, or from the database, which makes
    /// the user on first sight. Nil when the database knows of a revocation after the cookie's `iat`
    /// that this process has not polled yet.
    func principal(for session: Verified) async throws -> Principal? {
        // A user read before the identity's revocation may be an account deleted since, made again
        // by a later sign-in: read it again (the margin covers the database's clock against ours).
        let notBefore = session.revokedAt?.addingTimeInterval(AccessTokens.leeway)
        if let userID = users.user(of: session.subject, resolvedAfter: notBefore) {
            return principal(userID, session)
        }
        guard
            let user = try await identity.upsertUser(
                issuer: issuer, subject: session.subject,
                email: AuthService.profileText(session.email, limit: 320, shorten: false),
                displayName: AuthService.profileText(session.name, limit: 200, shorten: true), signedInAt: session.issuedAt)
        else { return nil }
        users.remember(user.id, of: session.subject)
        return principal(user.id, session)
    }

    private func principal(_ userID: UUID, _ session: Verified) -> Principal {
        Principal(userID: userID, session: .web(authTime: session.authTime), scope: Self.scope, tokenID: session.tokenID)
    }

    /// What `users.subject` holds: 1-255 characters, no NUL (PostgreSQL stores none).
    private static func isSubject(_ subject: String) -> Bool {
        !subject.isEmpty && subject.unicodeScalars.count <= 255 && !subject.utf8.contains(0)
    }
}
