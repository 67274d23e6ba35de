import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// One registered push token: a device's, of the service that issued it.
struct PushTokenRegistration: Sendable, Equatable {
    enum Provider: String, Sendable { case apns, fcm }

    let token: String
    let platform: String
    let provider: Provider
    let deviceID: String
}

/// `push_tokens` (docs/requirements.md §10.2, migration 0020): a token has one owner and a device one token.
struct PushTokenStore: Sendable {
    let database: Database
    /// On the Notification Hubs route, every change here enqueues the devices' mirrors with it.
    var installations: InstallationMirror = .off

    /// At most this many devices of one user keep tokens; registering beyond drops the least recently seen.
    static let devicesPerUser = 10
    /// A registration that changes nothing writes nothing, unless its row is older than this: the
    /// app registers on every launch, and the cap orders devices by when they were last seen.
    static let refreshAfter: Duration = .seconds(86_400)

    /// Registers `registration` for `userID`. The app calls it on every launch: an unchanged, fresh
    /// registration is one indexed read. Otherwise one transaction moves the token from another user,
    /// replaces the device's previous token, stores this one and applies the cap.
    func register(_ registration: PushTokenRegistration, userID: UUID) async throws {
        try await database.run { client in
            let current = try await client.query(
                """
                SELECT 1 FROM push_tokens
                WHERE user_id = \(userID) AND token = \(registration.token) AND device_id = \(registration.deviceID)
                  AND platform = \(registration.platform) AND provider = \(registration.provider.rawValue)
                  AND updated_at > now() - \(Int(Self.refreshAfter.components.seconds)) * interval '1 second'
                """, logger: database.logger)
            for try await _ in current { return }
            // Two registrations of one token by two accounts at once: the second's insert waits on the
            // first's uncommitted row in the unique index and fails once it commits; a second
            // transaction then sees that row, moves the token and stores it.
            do {
                try await store(registration, userID: userID, client: client)
            } catch  where Self.isUniqueViolation(error) {
                try await store(registration, userID: userID, client: client)
            }
        }
    }

    /// 23505, also when `withTransaction` wrapped it in a `PostgresTransactionError`.
    static func isUniqueViolation(_ error: any Error) -> Bool {
        switch error {
        case let error as PostgresTransactionError: error.cause.map(isUniqueViolation) ?? false
        case let error as PSQLError: error.serverInfo?[.sqlState] == "23505"
        default: false
        }
    }

    private func store(_ registration: PushTokenRegistration, userID: UUID, client: PostgresClient) async throws {
        try await client.withTransaction(logger: database.logger) { connection in
            // The token leaves any other account; the device's other tokens (its previous one) go.
            // Every device that loses a token here is mirrored too, as is one of the caller's own
            // that held this token before (the upsert below moves it to this device).
            var devices: Set<String> = [registration.deviceID]
            let left = try await connection.query(
                """
                WITH gone AS (
                    DELETE FROM push_tokens
                    WHERE (token = \(registration.token) AND user_id <> \(userID))
                       OR (device_id = \(registration.deviceID) AND token <> \(registration.token))
                    RETURNING device_id
                )
                SELECT device_id FROM gone
                UNION
                SELECT device_id FROM push_tokens
                WHERE user_id = \(userID) AND token = \(registration.token) AND device_id <> \(registration.deviceID)
                """, logger: database.logger)
            for try await device in left.decode(String.self) { devices.insert(device) }
            _ = try await connection.query(
                """
                INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
                VALUES (\(userID), \(registration.token), \(registration.platform), \(registration.provider.rawValue), \(registration.deviceID))
                ON CONFLICT (user_id, token) DO UPDATE SET platform = excluded.platform, provider = excluded.provider,
                    device_id = excluded.device_id, updated_at = now()
                """, logger: database.logger)
            let capped = try await connection.query(
                """
                DELETE FROM push_tokens WHERE user_id = \(userID) AND token IN (
                    SELECT token FROM push_tokens WHERE user_id = \(userID) ORDER BY updated_at DESC, token OFFSET \(Self.devicesPerUser))
                RETURNING device_id
                """, logger: database.logger)
            for try await device in capped.decode(String.self) { devices.insert(device) }
            // A registration refreshed after a day is mirrored again too: the hub's copy is
            // re-asserted at least daily while the app runs, whatever happened to it.
            try await installations.enqueue(devices: devices, on: connection, logger: database.logger)
            // The device row is the session's (login made it); it was seen now.
            _ = try await connection.query(
                """
                UPDATE devices SET last_seen_at = now()
                WHERE device_id = \(registration.deviceID) AND user_id = \(userID) AND last_seen_at < now() - interval '1 minute'
                """, logger: database.logger)
        }
    }

    /// Removes the caller's `token`; someone else's or an unknown one is left alone.
    func unregister(token: String, userID: UUID) async throws {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                let gone = try await connection.query(
                    "DELETE FROM push_tokens WHERE user_id = \(userID) AND token = \(token) RETURNING device_id", logger: database.logger)
                var devices: [String] = []
                for try await device in gone.decode(String.self) { devices.append(device) }
                try await installations.enqueue(devices: devices, on: connection, logger: database.logger)
            }
        }
    }

    /// The hub's installation of `deviceID` as `push_tokens` holds it now; nil when the device has
    /// no token. For the mirror job alone: it reads by device, whoever owns it, because the
    /// installation is the device's (a device has one token and one owner at a time, and a device
    /// taken over must end with its new owner's tag); nothing of it reaches a response.
    func installation(deviceID: String) async throws -> NotificationHubsClient.Installation? {
        try await database.run { client in
            let rows = try await client.query(
                "SELECT user_id, token, provider FROM push_tokens WHERE device_id = \(deviceID)", logger: database.logger)
            for try await (user, token, provider) in rows.decode((UUID, String, String).self) {
                return NotificationHubsClient.installation(
                    deviceID: deviceID, userID: user, token: token, provider: .init(rawValue: provider) ?? .fcm)
            }
            return nil
        }
    }

    /// The hub platforms the learner has tokens on, for a recall's tag sends: one send per platform.
    func platforms(userID: UUID) async throws -> [NotificationHubsClient.Platform] {
        try await database.run { client in
            let rows = try await client.query(
                "SELECT DISTINCT provider FROM push_tokens WHERE user_id = \(userID) ORDER BY provider", logger: database.logger)
            var platforms: [NotificationHubsClient.Platform] = []
            for try await provider in rows.decode(String.self) {
                platforms.append(NotificationHubsClient.Platform(PushTokenRegistration.Provider(rawValue: provider) ?? .fcm))
            }
            return platforms
        }
    }

    /// The caller's registrations, newest first (tests and the delivery's reads).
    func tokens(userID: UUID) async throws -> [PushTokenRegistration] {
        try await database.run { client in
            let rows = try await client.query(
                "SELECT token, platform, provider, device_id FROM push_tokens WHERE user_id = \(userID) ORDER BY updated_at DESC, token",
                logger: database.logger)
            var tokens: [PushTokenRegistration] = []
            for try await (token, platform, provider, device) in rows.decode((String, String, String, String).self) {
                tokens.append(PushTokenRegistration(token: token, platform: platform, provider: .init(rawValue: provider) ?? .fcm, deviceID: device))
            }
            return tokens
        }
    }
}
