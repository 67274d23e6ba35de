import BFFJobs
import BFFPlatform
import Crypto
import Foundation
import Logging
import PostgresNIO

/// Why an account was not deleted.
enum AccountDeletionRefusal: Error, Equatable {
    /// The caller's session was revoked or is gone (its access token still runs until it expires),
    /// or, for the web's session, its account is.
    case sessionEnded
    /// The session's interactive login is older than `AccountDeletion.reauthenticationWindow`, or
    /// unknown (an app session's family without `auth_time`, a web session without the claim).
    case reauthenticationRequired
}

/// `DELETE /api/v1/me` (App Store Review Guideline 5.1.1(v)): every row of the user in one
/// transaction, their sessions refused everywhere within a revocation poll, the RevenueCat customer
/// removed by a job, and an audit row holding no personal data.
struct AccountDeletion: Sendable {
    let database: Database
    let revokedSessions: RevokedSessions
    /// Whether RevenueCat is configured: only then is there a customer to remove.
    let removesStoreCustomer: Bool
    let logger: Logger
    /// On the Notification Hubs route, the learner's installations are deleted by jobs enqueued here.
    var installations: InstallationMirror = .off

    /// How recent the session's interactive login must be.
    static let reauthenticationWindow: TimeInterval = 600

    struct Outcome: Sendable, Equatable {
        let deletedAt: Date
        /// A subscription still renews (App Store, Google Play or the web's billing): the user must
        /// cancel it where it is managed.
        let storeSubscriptionActive: Bool
    }

    /// The learner's counts in the rate limiter: the turn's, verification's and every per-user limit of the operation table.
    static func rateLimitKeys(of userID: UUID) -> [String] {
        let user = userID.uuidString.lowercased()
        return ["chat:user:\(user)", "iap:verify:\(user)"] + OperationTable.userBuckets.map { RateLimitMiddleware.userKey(bucket: $0, userID: userID) }
    }

    func delete(_ principal: Principal) async throws -> Outcome {
        let userID = principal.userID
        let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
        let userHash = Data(SHA256.hash(data: salt + Data(userID.uuidString.lowercased().utf8)))
        let (outcome, families, identity) = try await database.run { client in
            try await client.withTransaction(logger: logger) { connection -> (Outcome, [UUID], (key: Data, revokedAt: Date)?) in
                let authenticatedAt: Date?
                switch principal.session {
                case .app(_, let familyID):
                    // The learner's authentication at the login this session began with (the IdP's
                    // auth_time made for that login; NULL when the IdP sent none or an older one): a
                    // refresh keeps its family, so a stolen refresh token gets no fresher login than the
                    // one it was stolen from, and a session without a known authentication is never fresh.
                    var session: Date??
                    for try await at in try await connection.query(
                        """
                        SELECT auth_time FROM refresh_families
                        WHERE id = \(familyID) AND user_id = \(userID) AND revoked_at IS NULL
                        FOR UPDATE
                        """, logger: logger
                    ).decode(Date?.self) { session = .some(at) }
                    guard let session else { throw AccountDeletionRefusal.sessionEnded }
                    authenticatedAt = session
                case .web(let authTime):
                    // The web's cookie carries the IdP's auth_time of its sign-in, which the web's
                    // `jwt` callback copied (docs/web-session.md); without it, it is never fresh.
                    var exists = false
                    for try await _ in try await connection.query("SELECT 1 FROM users WHERE id = \(userID) FOR UPDATE", logger: logger) {
                        exists = true
                    }
                    guard exists else { throw AccountDeletionRefusal.sessionEnded }
                    // A clock ahead at the IdP must not make a sign-in look fresher than now.
                    authenticatedAt = authTime.map { min($0, Date()) }
                }
                guard let loggedInAt = authenticatedAt, Date().timeIntervalSince(loggedInAt) <= Self.reauthenticationWindow else {
                    throw AccountDeletionRefusal.reauthenticationRequired
                }
                var renewing = false
                for try await count in try await connection.query(
                    "SELECT count(*)::int FROM iap_receipts WHERE user_id = \(userID) AND will_renew AND status <> 'expired'", logger: logger
                ).decode(Int.self) { renewing = count > 0 }
                var families: [UUID] = []
                for try await family in try await connection.query(
                    "SELECT id FROM refresh_families WHERE user_id = \(userID)", logger: logger
                ).decode(UUID.self) { families.append(family) }
                _ = try await connection.query(
                    "INSERT INTO deleted_sessions (family_id) SELECT unnest(\(families)::uuid[]) ON CONFLICT DO NOTHING", logger: logger)
                // What names the user outside the rows that cascade: webhook events and rate-limit keys.
                _ = try await connection.query(
                    """
                    UPDATE revenuecat_events
                    SET app_user_ids = array_remove(app_user_ids, \(userID.uuidString.lowercased())),
                        pending_users = array_remove(pending_users, \(userID)),
                        processed_at = coalesce(processed_at, CASE WHEN cardinality(array_remove(pending_users, \(userID))) = 0 THEN now() END)
                    WHERE app_user_ids @> ARRAY[\(userID.uuidString.lowercased())]::text[] OR pending_users @> ARRAY[\(userID)]::uuid[]
                    """, logger: logger)
                let user = userID.uuidString.lowercased()
                _ = try await connection.query(
                    "DELETE FROM rate_limits WHERE key = ANY(\(Self.rateLimitKeys(of: userID)))", logger: logger)
                if removesStoreCustomer {
                    // Not tied to the user (its row is about to go): the job holds the id only until it has run.
                    try await JobQueue.enqueue(
                        SubscriptionSync.deleteCustomerKind, SubscriptionSync.CustomerArgs(appUserID: user), on: connection, logger: logger)
                }
                if installations.isOn {
                    // The tokens cascade with the user; their devices' installations are removed by
                    // jobs tied to no user, which the cascade leaves in place.
                    var devices: [String] = []
                    for try await device in try await connection.query(
                        "SELECT device_id FROM push_tokens WHERE user_id = \(userID)", logger: logger
                    ).decode(String.self) { devices.append(device) }
                    try await installations.enqueue(devices: devices, on: connection, logger: logger)
                }
                var deletedAt = Date()
                for try await at in try await connection.query(
                    "INSERT INTO account_deletions (salt, user_hash) VALUES (\(salt), \(userHash)) RETURNING deleted_at", logger: logger
                ).decode(Date.self) { deletedAt = at }
                // The web's cookies belong to no family: they are refused by the identity's revocation.
                let identity = try await IdentityStore.revokeIdentity(of: userID, on: connection, logger: logger)
                // Chats, messages, evaluations, tags, settings, devices, push tokens, recalls, jobs,
                // sessions, idempotency keys, subscriptions, entitlement, usage and the achievements
                // (their progress, trophies and streak pushes) cascade from here.
                _ = try await connection.query("DELETE FROM users WHERE id = \(userID)", logger: logger)
                return (Outcome(deletedAt: deletedAt, storeSubscriptionActive: renewing), families, identity)
            }
        }
        revokedSessions.record(families)
        if let identity { revokedSessions.record(identity: identity.key, revokedAt: identity.revokedAt) }
        logger.notice(
            "account deleted",
            metadata: ["sessions_ended": .stringConvertible(families.count), "store_subscription_active": .stringConvertible(outcome.storeSubscriptionActive)])
        return outcome
    }

    /// Deleted accounts' sessions, once no access token of theirs can still run.
    static func purgeDeletedSessions(database: Database) async throws {
        try await database.deleteInBatches(from: "deleted_sessions", where: "deleted_at < now() - interval '1 day'")
    }
}
