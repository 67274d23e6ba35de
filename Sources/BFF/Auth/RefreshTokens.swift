import Crypto
import Foundation
import Logging
import PostgresNIO

/// Why a refresh was refused; each maps to the contract's 401 code.
enum RefreshRefusal: Error, Equatable {
    case unknown, expired, revoked, reused, deviceMismatch

    var apiError: APIError {
        switch self {
        case .unknown: APIError(.unauthorized, "invalid_refresh_token", "The refresh token is not valid.")
        case .expired: APIError(.unauthorized, "refresh_expired", "The refresh token has expired; sign in again.")
        case .revoked: APIError(.unauthorized, "session_revoked", "This session was revoked; sign in again.")
        case .reused, .deviceMismatch:
            APIError(.unauthorized, "refresh_reused", "The refresh token was already used; the session was revoked for safety.")
        }
    }
}

/// A refresh token the client holds and what it belongs to.
struct IssuedRefreshToken: Sendable, Equatable {
    let token: String
    let userID: UUID
    let deviceID: String
    let familyID: UUID
    let issuedAt: Date
    let expiresAt: Date
}

/// Refresh tokens (DESIGN §7): 256-bit random, stored only as SHA-256, bound to a device, usable once,
/// grouped in families. A child is HMAC(server key, parent) rather than fresh randomness, so a retry
/// of the same parent inside the reuse interval can be answered with the very same child although
/// only hashes are stored.
struct RefreshTokenStore: Sendable {
    let database: Database
    let derivationKey: SymmetricKey
    let lifetime: TimeInterval
    let reuseInterval: TimeInterval
    let logger: Logger

    init(database: Database, keyRing: JWTKeyRing, lifetime: Int, reuseInterval: Int, logger: Logger) {
        self.database = database
        // Its own key, derived from the signing key, so the JWT secret itself never signs anything else.
        derivationKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: keyRing.signingKey.secret),
            info: Data("bff refresh-token derivation v1".utf8), outputByteCount: 32)
        self.lifetime = TimeInterval(lifetime)
        self.reuseInterval = TimeInterval(reuseInterval)
        self.logger = logger
    }

    func child(of parent: String) -> String {
        Base64URL.encode(HMAC<SHA256>.authenticationCode(for: Data(parent.utf8), using: derivationKey))
    }

    /// Opens a new family (a login on one device) with its first token.
    func startFamily(userID: UUID, deviceID: String, idpSessionID: String?) async throws -> IssuedRefreshToken {
        let token = SecureRandom.token()
        let hash = Digest.sha256(token)
        let lifetime = self.lifetime
        let (familyID, issuedAt, expiresAt) = try await database.run { client in
            let rows = try await client.query("""
                WITH family AS (
                    INSERT INTO refresh_families (user_id, device_id, idp_sid) VALUES (\(userID), \(deviceID), \(idpSessionID))
                    RETURNING id
                )
                INSERT INTO refresh_tokens (token_hash, family_id, device_id, issued_at, expires_at)
                SELECT \(hash), family.id, \(deviceID), date_trunc('second', now()),
                       date_trunc('second', now()) + make_interval(secs => \(lifetime))
                FROM family
                RETURNING family_id, issued_at, expires_at
                """)
            for try await row in rows.decode((UUID, Date, Date).self) { return row }
            throw DatabaseUnavailable(reason: "refresh family insert returned no row")
        }
        return IssuedRefreshToken(token: token, userID: userID, deviceID: deviceID, familyID: familyID, issuedAt: issuedAt, expiresAt: expiresAt)
    }

    /// The family a token belongs to, for per-family rate limiting before the rotation itself.
    func family(of token: String) async throws -> UUID? {
        let hash = Digest.sha256(token)
        return try await database.run { client in
            let rows = try await client.query("SELECT family_id FROM refresh_tokens WHERE token_hash = \(hash)")
            for try await id in rows.decode(UUID.self) { return id }
            return nil
        }
    }

    private enum Outcome: Sendable {
        case rotated(IssuedRefreshToken)
        case refused(RefreshRefusal, familyID: UUID?)
    }

    /// One-time rotation in one transaction holding the family's row lock, so concurrent presentations
    /// of one token are serialised: the first rotates, retries within the interval get the same child,
    /// anything else revokes the family.
    func rotate(_ token: String, deviceID: String) async throws -> IssuedRefreshToken {
        let parentHash = Digest.sha256(token)
        let childToken = child(of: token)
        let childHash = Digest.sha256(childToken)
        let (lifetime, reuseInterval, logger) = (self.lifetime, self.reuseInterval, self.logger)
        let outcome: Outcome = try await database.run { client in
            try await client.withTransaction(logger: logger) { connection -> Outcome in
                let locked = try await connection.query("""
                    SELECT f.id, f.user_id, f.revoked_at IS NOT NULL, t.device_id, t.expires_at <= now()
                    FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id
                    WHERE t.token_hash = \(parentHash)
                    FOR UPDATE OF f
                    """, logger: logger)
                var found: (UUID, UUID, Bool, String, Bool)?
                for try await row in locked.decode((UUID, UUID, Bool, String, Bool).self) { found = row }
                guard let (familyID, userID, revoked, boundDevice, expired) = found else { return .refused(.unknown, familyID: nil) }
                if revoked { return .refused(.revoked, familyID: familyID) }
                if boundDevice != deviceID {
                    try await Self.revoke(connection, familyID: familyID, reason: "device_mismatch", logger: logger)
                    return .refused(.deviceMismatch, familyID: familyID)
                }
                if expired { return .refused(.expired, familyID: familyID) }

                let marked = try await connection.query(
                    "UPDATE refresh_tokens SET used_at = now() WHERE token_hash = \(parentHash) AND used_at IS NULL RETURNING token_hash",
                    logger: logger)
                var rotatedNow = false
                for try await _ in marked { rotatedNow = true }
                if rotatedNow {
                    let inserted = try await connection.query("""
                        INSERT INTO refresh_tokens (token_hash, family_id, parent_hash, device_id, issued_at, expires_at)
                        VALUES (\(childHash), \(familyID), \(parentHash), \(deviceID), date_trunc('second', now()),
                                date_trunc('second', now()) + make_interval(secs => \(lifetime)))
                        RETURNING issued_at, expires_at
                        """, logger: logger)
                    for try await (issuedAt, expiresAt) in inserted.decode((Date, Date).self) {
                        return .rotated(IssuedRefreshToken(
                            token: childToken, userID: userID, deviceID: deviceID, familyID: familyID,
                            issuedAt: issuedAt, expiresAt: expiresAt))
                    }
                    throw DatabaseUnavailable(reason: "refresh token insert returned no row")
                }

                // Already used: a lost response retried within the interval gets the unused child again.
                let replay = try await connection.query("""
                    SELECT c.issued_at, c.expires_at
                    FROM refresh_tokens p JOIN refresh_tokens c ON c.token_hash = \(childHash) AND c.parent_hash = p.token_hash
                    WHERE p.token_hash = \(parentHash) AND c.used_at IS NULL
                      AND p.used_at > now() - make_interval(secs => \(reuseInterval))
                    """, logger: logger)
                for try await (issuedAt, expiresAt) in replay.decode((Date, Date).self) {
                    return .rotated(IssuedRefreshToken(
                        token: childToken, userID: userID, deviceID: deviceID, familyID: familyID,
                        issuedAt: issuedAt, expiresAt: expiresAt))
                }
                try await Self.revoke(connection, familyID: familyID, reason: "reuse_detected", logger: logger)
                return .refused(.reused, familyID: familyID)
            }
        }
        switch outcome {
        case .rotated(let issued):
            return issued
        case .refused(let refusal, let familyID):
            if refusal == .reused || refusal == .deviceMismatch {
                logger.warning("security: refresh token family revoked", metadata: [
                    "event": .string(refusal == .reused ? "refresh_reuse_detected" : "refresh_device_mismatch"),
                    "family_id": .string(familyID?.uuidString ?? "-"),
                ])
            }
            throw refusal
        }
    }

    private static func revoke(_ connection: PostgresConnection, familyID: UUID, reason: String, logger: Logger) async throws {
        _ = try await connection.query("""
            UPDATE refresh_families SET revoked_at = now(), revoked_reason = \(reason)
            WHERE id = \(familyID) AND revoked_at IS NULL
            """, logger: logger)
    }
}
