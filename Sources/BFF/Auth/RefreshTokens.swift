import BFFPlatform
import BFFWire
import Crypto
import Foundation
import Logging
import PostgresNIO

/// Why a refresh was refused: the token's own state (each a 401 of the contract's), or the
/// family's rate limit.
enum RefreshRefusal: Error, Equatable {
    case unknown, expired, revoked
    /// The statement revoked `family` on the spot.
    case reused(family: UUID), deviceMismatch(family: UUID)
    /// The family's own limit (10 a minute) refused the refresh; it may be retried after that many seconds.
    case rateLimited(retryAfter: Double)

    /// The family this refusal revoked, whose access tokens must stop working too.
    var revokedFamily: UUID? {
        switch self {
        case .reused(let family), .deviceMismatch(let family): family
        case .unknown, .expired, .revoked, .rateLimited: nil
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
    /// What the family's access tokens grant: every scope unless it was issued narrower.
    var scopes: [String] = AccessTokens.allScopes
}

/// Refresh tokens (docs/architecture.md#the-security-model): 256-bit random, stored only as SHA-256, bound to a device, usable once,
/// grouped in families. A child is HMAC(server key, parent) rather than fresh randomness, so a retry
/// of the same parent inside the reuse interval can be answered with the very same child although
/// only hashes are stored.
struct RefreshTokenStore: Sendable {
    let database: Database
    /// One per key of the ring, in its order: the first derives the children this process stores.
    let derivationKeys: [SymmetricKey]
    let lifetime: TimeInterval
    let reuseInterval: TimeInterval
    let logger: Logger

    init(database: Database, keyRing: JWTKeyRing, lifetime: Duration, reuseInterval: Duration, logger: Logger) {
        self.database = database
        // Keys of their own, derived from the ring's, so a JWT secret itself never signs anything else.
        // The whole ring, so that a retry reaching a replica whose ring differs during a key
        // rotation still finds the child the first replica stored (migration 0008).
        derivationKeys = keyRing.keys.map { key in
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: key.secret),
                info: Data("bff refresh-token derivation v1".utf8), outputByteCount: 32)
        }
        self.lifetime = TimeInterval(lifetime.components.seconds)
        self.reuseInterval = TimeInterval(reuseInterval.components.seconds)
        self.logger = logger
    }

    /// The parent's child under each key of the ring; a rotation stores the first.
    func children(of parent: String) -> [String] {
        derivationKeys.map { key in Base64URL.encode(HMAC<SHA256>.authenticationCode(for: Data(parent.utf8), using: key)) }
    }

    /// Opens a new family (a login on one device) with its first token. Its rotations keep `scopes`;
    /// `authTime` is the IdP's time of the learner's authentication, when it sent one.
    func startFamily(
        userID: UUID, deviceID: String, idpSessionID: String?, scopes: [String] = AccessTokens.allScopes, authTime: Date? = nil
    ) async throws -> IssuedRefreshToken {
        let token = SecureRandom.token()
        let hash = Digest.sha256(token)
        let lifetime = self.lifetime
        // NULL, every scope, for each login: rotations then skip splitting a string.
        let scope = scopes == AccessTokens.allScopes ? nil : scopes.joined(separator: " ")
        let (familyID, issuedAt, expiresAt) = try await database.run { client in
            let rows = try await client.query(
                """
                WITH family AS (
                    INSERT INTO refresh_families (user_id, device_id, idp_sid, scope, auth_time)
                    VALUES (\(userID), \(deviceID), \(idpSessionID), \(scope), \(authTime))
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
        return IssuedRefreshToken(
            token: token, userID: userID, deviceID: deviceID, familyID: familyID, issuedAt: issuedAt, expiresAt: expiresAt, scopes: scopes)
    }

    /// One-time rotation in one statement (`bff_refresh_rotate_ring`, migrations/functions) holding the family's row lock, so concurrent presentations of one token are serialised:
    /// the first rotates, retries within the interval get the same child (derived under any key of
    /// the ring), anything else revokes the family. Only a rotation or a retry counts against the
    /// family's own rate limit; on success the user's row comes back and the device is touched.
    func rotate(_ token: String, deviceID: String, familyRate: Int, familyPeriod: Duration) async throws -> RotatedRefreshToken {
        let children = children(of: token)
        let childHashes = children.map { Digest.sha256($0) }
        let statement = RotateRefreshToken(
            parentHash: Digest.sha256(token), childHashes: childHashes, deviceID: deviceID,
            lifetimeSeconds: Int(lifetime), reuseSeconds: Int(reuseInterval), familyRate: familyRate,
            familyPeriod: familyPeriod.seconds)
        let row = try await database.run { client in
            for try await row in try await client.execute(statement) { return row }
            throw DatabaseUnavailable(reason: "bff_refresh_rotate_ring returned no row")
        }
        guard let outcome = RotationOutcome(rawValue: row.outcome) else {
            throw DatabaseUnavailable(reason: "bff_refresh_rotate_ring returned outcome \(row.outcome)")
        }
        switch outcome {
        case .rotated:
            guard let familyID = row.familyID, let userID = row.userID, let issuedAt = row.issuedAt, let expiresAt = row.expiresAt,
                let index = childHashes.firstIndex(where: { $0 == row.childHash })
            else {
                throw DatabaseUnavailable(reason: "bff_refresh_rotate_ring returned an incomplete rotation")
            }
            let childToken = children[index]
            return RotatedRefreshToken(
                token: IssuedRefreshToken(
                    token: childToken, userID: userID, deviceID: deviceID, familyID: familyID, issuedAt: issuedAt, expiresAt: expiresAt,
                    scopes: row.scope.map { $0.split(separator: " ").map(String.init) } ?? AccessTokens.allScopes),
                user: UserRecord(id: userID, email: row.email, displayName: row.displayName))
        case .rateLimited:
            throw RefreshRefusal.rateLimited(retryAfter: row.retryAfter ?? 1)
        case .unknown: throw RefreshRefusal.unknown
        case .expired: throw RefreshRefusal.expired
        case .revoked: throw RefreshRefusal.revoked
        case .reused, .deviceMismatch:
            guard let familyID = row.familyID else {
                throw DatabaseUnavailable(reason: "bff_refresh_rotate_ring revoked a family it did not name")
            }
            logger.warning(
                "security: refresh token family revoked",
                metadata: [
                    "event": .string(outcome == .reused ? "refresh_reuse_detected" : "refresh_device_mismatch"),
                    "family_id": .string(familyID.uuidString),
                ])
            throw outcome == .reused ? RefreshRefusal.reused(family: familyID) : RefreshRefusal.deviceMismatch(family: familyID)
        }
    }
}

/// What `bff_refresh_rotate_ring` (migrations/functions) says of a presented token: its `outcome`.
enum RotationOutcome: String, CaseIterable, Sendable {
    case rotated
    case rateLimited = "rate_limited"
    case unknown, expired, revoked, reused
    case deviceMismatch = "device_mismatch"
}

/// A rotation's new token and the user it belongs to.
struct RotatedRefreshToken: Sendable {
    let token: IssuedRefreshToken
    let user: UserRecord
}

/// `bff_refresh_rotate_ring` as a prepared statement: parsed and planned once per connection.
struct RotateRefreshToken: PostgresPreparedStatement {
    static let name = "bff_rotate_refresh_token"
    // No per-address limit (the last three arguments): a school's or a carrier's many learners
    // behind one address refresh every 15 minutes, and the 256-bit token and the family's own
    // limit bound what one client can do.
    static let sql = """
        SELECT outcome, child_hash, family_id, user_id, issued_at, expires_at, retry_after, email, display_name, scope
        FROM bff_refresh_rotate_ring($1, $2, $3, $4, $5, $6, $7, NULL, 0, 0)
        """

    struct Row: Sendable {
        let outcome: String
        let childHash: Data?
        let familyID: UUID?
        let userID: UUID?
        let issuedAt: Date?
        let expiresAt: Date?
        let retryAfter: Double?
        let email: String?
        let displayName: String?
        let scope: String?
    }

    let parentHash: Data
    let childHashes: [Data]
    let deviceID: String
    let lifetimeSeconds: Int
    let reuseSeconds: Int
    let familyRate: Int
    let familyPeriod: Double

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 7)
        try bindings.append(parentHash)
        bindings.append(childHashes.map { ByteBuffer(bytes: $0) })
        bindings.append(deviceID)
        bindings.append(Int32(lifetimeSeconds))
        bindings.append(Int32(reuseSeconds))
        bindings.append(Int32(familyRate))
        bindings.append(familyPeriod)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        let (outcome, childHash, familyID, userID, issuedAt, expiresAt, retryAfter, email, displayName, scope) =
            try row.decode((String, Data?, UUID?, UUID?, Date?, Date?, Double?, String?, String?, String?).self)
        return Row(
            outcome: outcome, childHash: childHash, familyID: familyID, userID: userID, issuedAt: issuedAt, expiresAt: expiresAt,
            retryAfter: retryAfter, email: email, displayName: displayName, scope: scope)
    }
}
