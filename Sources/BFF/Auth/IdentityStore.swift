import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// A one-time login between `/auth/start` and `/auth/callback`. It holds the app's PKCE challenge;
/// the verifier stays with the app until the callback.
struct PendingLogin: Sendable {
    let nonce: String
    let codeChallenge: String
    let deviceID: String
    let redirectURI: String
    /// The app asked the IdP to authenticate the learner again (`reauthenticate=true`).
    var reauthenticate = false
    /// When `/auth/start` made it; set by the database.
    var startedAt: Date?
}

struct UserRecord: Sendable, Equatable {
    let id: UUID
    let email: String?
    let displayName: String?
}

struct DeviceRecord: Sendable, Equatable {
    let deviceID: String
    let model: String?
    let osVersion: String?
    let lastSeenAt: Date
    /// From `X-Client`; nil until the app sent one.
    var appVersion: String? = nil
}

/// Users, devices, one-time logins and session revocation. Every query of user data names the user;
/// only housekeeping and the revocation poll read across users, and never into a response.
struct IdentityStore: Sendable {
    let database: Database
    /// On the Notification Hubs route, every push token a sign-out or take-over removes enqueues its
    /// device's mirror in the same transaction.
    var installations: InstallationMirror = .off

    func createLogin(state: String, login: PendingLogin, lifetime: TimeInterval) async throws -> Date {
        let stateHash = Digest.sha256(state)
        return try await database.run { client in
            let rows = try await client.query(
                """
                INSERT INTO oidc_logins (state_hash, nonce, code_challenge, device_id, redirect_uri, reauthenticate, expires_at)
                VALUES (\(stateHash), \(login.nonce), \(login.codeChallenge), \(login.deviceID), \(login.redirectURI), \(login.reauthenticate),
                        now() + make_interval(secs => \(lifetime)))
                RETURNING expires_at
                """)
            for try await expiresAt in rows.decode(Date.self) { return expiresAt }
            throw DatabaseUnavailable(reason: "login insert returned no row")
        }
    }

    /// Consumes a login exactly once: the row is deleted by the statement that reads it.
    func consumeLogin(state: String) async throws -> PendingLogin? {
        let stateHash = Digest.sha256(state)
        return try await database.run { client in
            let rows = try await client.query(
                """
                DELETE FROM oidc_logins WHERE state_hash = \(stateHash)
                RETURNING nonce, code_challenge, device_id, redirect_uri, reauthenticate, created_at, expires_at > now()
                """)
            for try await (nonce, challenge, device, redirect, reauthenticate, startedAt, live) in rows.decode(
                (String, String, String, String, Bool, Date, Bool).self)
            {
                guard live else { return nil }
                return PendingLogin(
                    nonce: nonce, codeChallenge: challenge, deviceID: device, redirectURI: redirect, reauthenticate: reauthenticate,
                    startedAt: startedAt)
            }
            return nil
        }
    }

    func purgeExpiredLogins() async throws {
        try await database.deleteInBatches(from: "oidc_logins", where: "expires_at < now()")
    }

    func purgeExpiredLogoutTokens() async throws {
        try await database.deleteInBatches(from: "oidc_logout_tokens", where: "expires_at < now()")
    }

    /// How long after it expires a refresh token is kept: presented meanwhile, it is answered
    /// `refresh_expired` (sign in again) rather than `invalid_refresh_token`.
    static let spentTokenGrace: TimeInterval = 7 * 86_400

    /// Arbitrary, fixed: the transaction-level advisory lock a purge batch takes, so that replicas
    /// take turns instead of all waiting on the same 5,000 rows.
    static let purgeLockKey: Int64 = 0x0BFF_0002

    /// Deletes refresh tokens `spentTokenGrace` after they expire, oldest first, and a family once
    /// all of its tokens are that old, in batches of 5,000 (`Database.inBatches`).
    /// Nothing is lost: an expired token is refused before reuse detection looks at it, so it can no
    /// longer revoke anything, and a family whose tokens all expired can issue nothing (its access
    /// tokens expired long before). Its row goes with them, as the learner's privacy asks.
    func purgeSpentSessions() async throws {
        let grace = Self.spentTokenGrace
        try await database.inBatches(of: 5000) { client in
            // A family is deleted only in the batch holding all of its remaining tokens, so its
            // cascade stays inside the batch. Families go first (their tokens by cascade), the
            // order in which a refresh locks. A replica that finds the lock taken does nothing.
            let rows = try await client.query(
                """
                WITH turn AS (
                    SELECT pg_try_advisory_xact_lock(\(Self.purgeLockKey)) AS ours
                ), spent AS (
                    SELECT token_hash, family_id FROM refresh_tokens
                    WHERE (SELECT ours FROM turn) AND expires_at < now() - make_interval(secs => \(grace))
                    ORDER BY expires_at
                    LIMIT 5000
                ), emptied AS (
                    DELETE FROM refresh_families f
                    WHERE f.id IN (SELECT family_id FROM spent)
                      AND NOT EXISTS (SELECT 1 FROM refresh_tokens t
                                      WHERE t.family_id = f.id AND t.token_hash NOT IN (SELECT token_hash FROM spent))
                    RETURNING f.id
                ), deleted AS (
                    DELETE FROM refresh_tokens t USING spent s
                    WHERE t.token_hash = s.token_hash AND s.family_id NOT IN (SELECT id FROM emptied)
                )
                SELECT count(*)::int FROM spent
                """)
            for try await spent in rows.decode(Int.self) { return spent }
            return 0
        }
    }

    /// The user of `(issuer, subject)`, created on first login; email and name follow the IdP.
    func upsertUser(issuer: String, subject: String, email: String?, displayName: String?) async throws -> UserRecord {
        guard let user = try await upsertUser(issuer: issuer, subject: subject, email: email, displayName: displayName, signedInAt: nil) else {
            throw DatabaseUnavailable(reason: "user upsert returned no row")
        }
        return user
    }

    /// `upsertUser` for a sign-in made at `signedInAt` (the web's session cookie, `WebSessions`):
    /// nil, creating and changing nothing, when the identity was revoked user-wide after that
    /// (`revokeIdentity`), so that a session begun before an account's deletion cannot make the
    /// account again, whatever this process has polled.
    func upsertUser(issuer: String, subject: String, email: String?, displayName: String?, signedInAt: Date?) async throws -> UserRecord? {
        let identity = Self.identityKey(issuer: issuer, subject: subject)
        return try await database.run { client in
            let rows = try await client.query(
                """
                INSERT INTO users (issuer, subject, email, display_name)
                SELECT \(issuer), \(subject), \(email), \(displayName)
                WHERE NOT EXISTS (SELECT 1 FROM revoked_identities WHERE identity_hash = \(identity) AND revoked_at > \(signedInAt))
                ON CONFLICT (issuer, subject) DO UPDATE
                    SET email = coalesce(excluded.email, users.email),
                        display_name = coalesce(excluded.display_name, users.display_name),
                        updated_at = now()
                RETURNING id, email, display_name
                """)
            for try await (id, email, name) in rows.decode((UUID, String?, String?).self) {
                return UserRecord(id: id, email: email, displayName: name)
            }
            return nil
        }
    }

    /// How a user-wide revocation names the user: SHA-256 of the IdP issuer, a line feed and the
    /// subject, which is what the web's cookie names and what outlives the account's deletion
    /// without keeping the subject readable. `revokeIdentity` computes the same in SQL.
    static func identityKey(issuer: String, subject: String) -> Data {
        Digest.sha256(issuer + "\n" + subject)
    }

    /// Records a user-wide revocation of `userID`'s identity now (an operator's revocation of the
    /// user, an account deletion), in the caller's transaction; returns its key and time, nil for
    /// no such user. The web's session cookies issued before are refused from then on.
    static func revokeIdentity(of userID: UUID, on connection: PostgresConnection, logger: Logger) async throws -> (key: Data, revokedAt: Date)? {
        let rows = try await connection.query(
            """
            INSERT INTO revoked_identities (identity_hash)
            SELECT sha256(convert_to(issuer || chr(10) || subject, 'UTF8')) FROM users WHERE id = \(userID)
            ON CONFLICT (identity_hash) DO UPDATE SET revoked_at = excluded.revoked_at
            RETURNING identity_hash, revoked_at
            """, logger: logger)
        var revoked: (key: Data, revokedAt: Date)?
        for try await (key, at) in rows.decode((Data, Date).self) { revoked = (key, at) }
        return revoked
    }

    func user(id: UUID) async throws -> UserRecord? {
        try await database.run { client in
            let rows = try await client.query("SELECT id, email, display_name FROM users WHERE id = \(id)")
            for try await (id, email, name) in rows.decode((UUID, String?, String?).self) {
                return UserRecord(id: id, email: email, displayName: name)
            }
            return nil
        }
    }

    /// What signing in on a device took from other accounts.
    struct DeviceTakeover: Sendable, Equatable {
        var families: [UUID] = []
        var previousUsers: [UUID] = []
    }

    /// Records that `deviceID` is in use by `userID` now. One device, one account: the device's row
    /// moves to `userID`, and every other account's live sessions and push tokens on it end, in one
    /// transaction. Returns the families revoked and the accounts that lost the device.
    func claimDevice(userID: UUID, deviceID: String) async throws -> DeviceTakeover {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                // Families before the device row: the order in which a refresh takes its locks.
                let families = try await connection.query(
                    """
                    UPDATE refresh_families SET revoked_at = now(), revoked_reason = 'device_taken_over'
                    WHERE device_id = \(deviceID) AND user_id <> \(userID) AND revoked_at IS NULL
                    RETURNING id, user_id
                    """, logger: database.logger)
                var takeover = DeviceTakeover()
                var previous = Set<UUID>()
                for try await (family, user) in families.decode((UUID, UUID).self) {
                    takeover.families.append(family)
                    previous.insert(user)
                }
                let moved = try await connection.query(
                    """
                    WITH before AS (
                        SELECT user_id FROM devices WHERE device_id = \(deviceID) AND user_id <> \(userID) FOR UPDATE
                    ), upsert AS (
                        INSERT INTO devices (device_id, user_id, last_seen_at) VALUES (\(deviceID), \(userID), now())
                        ON CONFLICT (device_id) DO UPDATE SET user_id = excluded.user_id, last_seen_at = now()
                    )
                    SELECT user_id FROM before
                    """, logger: database.logger)
                for try await user in moved.decode(UUID.self) { previous.insert(user) }
                let tokens = try await connection.query(
                    "DELETE FROM push_tokens WHERE device_id = \(deviceID) AND user_id <> \(userID) RETURNING user_id",
                    logger: database.logger)
                var untokened = false
                for try await user in tokens.decode(UUID.self) {
                    previous.insert(user)
                    untokened = true
                }
                if untokened { try await installations.enqueue(devices: [deviceID], on: connection, logger: database.logger) }
                takeover.previousUsers = previous.sorted { $0.uuidString < $1.uuidString }
                return takeover
            }
        }
    }

    /// The user's devices: those whose row is theirs, and those they still have a live session on
    /// without the row (sessions begun before one device meant one account, which `claimDevice`
    /// now ensures), so that they can still be reported lost.
    func devices(userID: UUID) async throws -> [DeviceRecord] {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT device_id, model, os_version, last_seen_at, app_version FROM devices WHERE user_id = \(userID)
                UNION ALL
                SELECT f.device_id, NULL, NULL, max(t.issued_at), NULL
                FROM refresh_families f
                JOIN refresh_tokens t ON t.family_id = f.id AND t.used_at IS NULL AND t.expires_at > now()
                WHERE f.user_id = \(userID) AND f.revoked_at IS NULL
                  AND NOT EXISTS (SELECT 1 FROM devices d WHERE d.device_id = f.device_id AND d.user_id = \(userID))
                GROUP BY f.device_id
                ORDER BY last_seen_at DESC, device_id
                """)
            var devices: [DeviceRecord] = []
            for try await (id, model, os, seen, version) in rows.decode((String, String?, String?, Date, String?).self) {
                devices.append(DeviceRecord(deviceID: id, model: model, osVersion: os, lastSeenAt: seen, appVersion: version))
            }
            return devices
        }
    }

    /// A lost-device report: every live session of the user on the device, their push tokens on it,
    /// and the device's row while it is still theirs. Nil when the user has neither (another user's
    /// device is left untouched); else the families revoked.
    func removeDevice(userID: UUID, deviceID: String) async throws -> [UUID]? {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                // Families before the device row: the order in which a refresh takes its locks.
                // Live sessions only, the ones `devices` lists: an expired one is nothing to report.
                let revoked = try await connection.query(
                    """
                    UPDATE refresh_families f SET revoked_at = now(), revoked_reason = 'lost_device'
                    WHERE f.user_id = \(userID) AND f.device_id = \(deviceID) AND f.revoked_at IS NULL
                      AND EXISTS (SELECT 1 FROM refresh_tokens t
                                  WHERE t.family_id = f.id AND t.used_at IS NULL AND t.expires_at > now())
                    RETURNING f.id
                    """, logger: database.logger)
                var families: [UUID] = []
                for try await family in revoked.decode(UUID.self) { families.append(family) }
                let deleted = try await connection.query(
                    "DELETE FROM devices WHERE device_id = \(deviceID) AND user_id = \(userID) RETURNING device_id",
                    logger: database.logger)
                var found = !families.isEmpty
                for try await _ in deleted { found = true }
                guard found else { return nil }
                try await untoken(userID: userID, deviceID: deviceID, on: connection)
                return families
            }
        }
    }

    /// Manual logout: this session's family, and the push tokens of its device.
    func logout(userID: UUID, familyID: UUID, deviceID: String) async throws {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                _ = try await connection.query(
                    """
                    UPDATE refresh_families SET revoked_at = now(), revoked_reason = 'logout'
                    WHERE id = \(familyID) AND user_id = \(userID) AND revoked_at IS NULL
                    """, logger: database.logger)
                try await untoken(userID: userID, deviceID: deviceID, on: connection)
            }
        }
    }

    /// Deletes the user's push token on the device and enqueues the device's mirror when there was one.
    private func untoken(userID: UUID, deviceID: String, on connection: PostgresConnection) async throws {
        let gone = try await connection.query(
            "DELETE FROM push_tokens WHERE user_id = \(userID) AND device_id = \(deviceID) RETURNING device_id", logger: database.logger)
        var devices: [String] = []
        for try await device in gone.decode(String.self) { devices.append(device) }
        try await installations.enqueue(devices: devices, on: connection, logger: database.logger)
    }

    /// Revokes the live families of a user, and their push tokens: a signed-out device gets no
    /// recall with a chat's title on it (the app registers again after the next sign-in). Returns
    /// how many families.
    /// The user's identity is revoked as well (`revokeIdentity`): the web's session cookies issued
    /// before belong to no family, and are refused by it.
    @discardableResult
    func revokeUser(userID: UUID, reason: String) async throws -> Int {
        try await revoke(
            identityOf: userID,
            """
            WITH revoked AS (
                UPDATE refresh_families SET revoked_at = now(), revoked_reason = \(reason)
                WHERE user_id = \(userID) AND revoked_at IS NULL
                RETURNING id
            ), untokened AS (
                DELETE FROM push_tokens WHERE user_id = \(userID) RETURNING device_id
            )
            SELECT (SELECT count(*) FROM revoked)::int, (SELECT coalesce(array_agg(device_id), '{}') FROM untokened)
            """)
    }

    /// Back-channel logout in one statement (and, on the hub route, the mirrors of the devices it
    /// took push tokens from, in its transaction): remembers the token's `jti` and revokes the issuer's live
    /// families of `subject` (only those of `idpSessionID` when given) or, without a subject, those of
    /// `idpSessionID`; returns the families it revoked. Nil when the token was acted on before: then
    /// nothing is revoked again, so a replay cannot end the sessions begun since. A failure leaves
    /// the token unremembered.
    /// A token naming only the subject leaves alone the families begun after it was issued: a first
    /// delivery that arrives late (the provider retries after an outage) must not end a session the
    /// user started since. A token naming an IdP session ends that session's families whenever they
    /// began: the session it names is over, and a login completed from it (its code exchanged after
    /// the token was issued) must not outlive it.
    func backchannelLogout(
        issuer: String, jti: String, issuedAt: Date, keepUntil: Date, subject: String?,
        idpSessionID: String?
    ) async throws -> [UUID]? {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection -> [UUID]? in
                let rows = try await connection.query(
                    """
                    WITH first_delivery AS (
                        INSERT INTO oidc_logout_tokens (issuer, jti, expires_at) VALUES (\(issuer), \(jti), \(keepUntil))
                        ON CONFLICT (issuer, jti) DO NOTHING
                        RETURNING jti
                    ), revoked AS (
                        UPDATE refresh_families f SET revoked_at = now(), revoked_reason = 'backchannel_logout'
                        FROM users u
                        WHERE EXISTS (SELECT 1 FROM first_delivery)
                          AND u.id = f.user_id AND u.issuer = \(issuer) AND f.revoked_at IS NULL
                          AND (\(idpSessionID)::text IS NOT NULL OR f.created_at <= \(issuedAt) + make_interval(secs => \(OIDCClient.leeway)))
                          AND (\(subject)::text IS NULL OR u.subject = \(subject))
                          AND (\(idpSessionID)::text IS NULL OR f.idp_sid = \(idpSessionID))
                        RETURNING f.id, f.user_id, f.device_id
                    ), untokened AS (
                        -- The signed-out devices' push tokens go with their sessions, as at logout.
                        DELETE FROM push_tokens p USING revoked r WHERE p.user_id = r.user_id AND p.device_id = r.device_id
                        RETURNING p.device_id
                    )
                    SELECT (SELECT count(*) FROM first_delivery)::int, (SELECT coalesce(array_agg(id), '{}') FROM revoked),
                           (SELECT coalesce(array_agg(device_id), '{}') FROM untokened)
                    """, logger: database.logger)
                var answer: (first: Int, revoked: [UUID], devices: [String])?
                for try await row in rows.decode((Int, [UUID], [String]).self) { answer = (row.0, row.1, row.2) }
                guard let answer else { throw DatabaseUnavailable(reason: "back-channel logout returned no row") }
                try await installations.enqueue(devices: answer.devices, on: connection, logger: database.logger)
                return answer.first == 1 ? answer.revoked : nil
            }
        }
    }

    /// Operator revocation of one device's sessions, whoever owns it, and the device's push tokens.
    @discardableResult
    func revokeDevice(deviceID: String, reason: String) async throws -> Int {
        try await revoke(
            """
            WITH revoked AS (
                UPDATE refresh_families SET revoked_at = now(), revoked_reason = \(reason)
                WHERE device_id = \(deviceID) AND revoked_at IS NULL
                RETURNING id
            ), untokened AS (
                DELETE FROM push_tokens WHERE device_id = \(deviceID) RETURNING device_id
            )
            SELECT (SELECT count(*) FROM revoked)::int, (SELECT coalesce(array_agg(device_id), '{}') FROM untokened)
            """)
    }

    /// Families revoked in the last `window` seconds by the database's clock, whoever revoked them
    /// (all users: this feeds `RevokedSessions`, not a response). One row of one array: postgres-nio
    /// spends microseconds on every row, and after a mass revocation there may be very many.
    func revokedFamilies(within window: TimeInterval) async throws -> [UUID] {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT coalesce(array_agg(id), '{}') FROM (
                    SELECT id FROM refresh_families WHERE revoked_at > now() - make_interval(secs => \(window))
                    UNION ALL
                    SELECT family_id FROM deleted_sessions WHERE deleted_at > now() - make_interval(secs => \(window))
                ) revoked
                """)
            for try await families in rows.decode([UUID].self) { return families }
            throw DatabaseUnavailable(reason: "revocation poll returned no row")
        }
    }

    /// Identities revoked user-wide in the last `window` seconds by the database's clock, and when
    /// (all users: this feeds `RevokedSessions`, not a response).
    func revokedIdentities(within window: TimeInterval) async throws -> [(key: Data, revokedAt: Date)] {
        try await database.run { client in
            let rows = try await client.query(
                "SELECT identity_hash, revoked_at FROM revoked_identities WHERE revoked_at > now() - make_interval(secs => \(window))")
            var identities: [(key: Data, revokedAt: Date)] = []
            for try await (key, at) in rows.decode((Data, Date).self) { identities.append((key, at)) }
            return identities
        }
    }

    /// Deletes user-wide revocations once no cookie issued before them can still be accepted:
    /// `WebSessions.maximumAge` (30 days) and a day.
    func purgeExpiredIdentityRevocations() async throws {
        try await database.deleteInBatches(from: "revoked_identities", where: "revoked_at < now() - interval '31 days'")
    }

    /// Runs a revocation that answers how many families it revoked and the devices whose push tokens
    /// it deleted, and enqueues those devices' mirrors in its transaction; returns the count. With
    /// `identityOf`, that user's identity is revoked in the same transaction.
    private func revoke(identityOf userID: UUID? = nil, _ query: PostgresQuery) async throws -> Int {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection -> Int in
                var answer: (families: Int, devices: [String])?
                for try await row in try await connection.query(query, logger: database.logger).decode((Int, [String]).self) {
                    answer = (row.0, row.1)
                }
                guard let answer else { throw DatabaseUnavailable(reason: "revocation returned no row") }
                try await installations.enqueue(devices: answer.devices, on: connection, logger: database.logger)
                if let userID { _ = try await Self.revokeIdentity(of: userID, on: connection, logger: database.logger) }
                return answer.families
            }
        }
    }
}
