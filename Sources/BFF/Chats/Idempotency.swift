import BFFPlatform
import Crypto
import Foundation
import Logging
import PostgresNIO

/// Why a request carrying an `Idempotency-Key` cannot be answered from the key's record, or the key
/// cannot be used at all. The answers are in `ChatHandlers.swift`.
enum IdempotencyError: Error, Equatable {
    /// The key is not 1–255 visible ASCII characters, as the contract states.
    case malformedKey
    /// The key was used with another request body.
    case keyReused
    /// The first request with the key is still running.
    case inProgress
}

/// An `Idempotency-Key` and the request it came with: the key checked as the contract states, and the
/// hash that tells a retry from the same key sent with another body.
enum IdempotencyRequest {
    /// Refuses a key that is not 1–255 visible ASCII characters.
    static func check(_ key: String?) throws {
        guard let key else { return }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw IdempotencyError.malformedKey
        }
    }

    /// SHA-256 of the request's canonical JSON (keys sorted).
    static func hash(_ request: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Data(SHA256.hash(data: try encoder.encode(request)))
    }
}

/// The one owner of `idempotency_keys`, shared by chat creation and the tutoring turn: a key is
/// claimed with its request's hash, answered once, and replayed to a retry with the same key and
/// body within its lifetime. Each call runs on the caller's connection, inside its transaction
/// when it has one. The claim and the answer are stored functions (`bff_claim_idempotency_key`,
/// `bff_answer_idempotency_key`), which the turn's own statements call too.
enum IdempotencyStore {
    /// How long a key is kept: a retry within it replays, and the key is free again after it.
    static let keyLifetime: Duration = .seconds(24 * 3600)

    struct Key: Sendable {
        let userID: UUID
        let operation: String
        let key: String
    }

    /// Takes `key` for a new request; false when it is taken: answered within its lifetime, or still
    /// running, unless that claim is older than `staleAfter` (a process that died mid-request).
    static func claim(_ key: Key, requestHash: Data, staleAfter: Duration? = nil, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.query(
            """
            SELECT bff_claim_idempotency_key(\(key.userID), \(key.operation), \(key.key), \(requestHash), \(keyLifetime.seconds), \(staleAfter?.seconds))
            """, logger: logger)
        for try await owned in rows.decode(Bool.self) { return owned }
        return false
    }

    /// Stores the response a retry will replay.
    static func answer(_ key: Key, status: Int, body: Data, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            "SELECT bff_answer_idempotency_key(\(key.userID), \(key.operation), \(key.key), \(Int32(status)), \(body))", logger: logger)
    }

    /// The first request's response for `key` within its lifetime: nil when there is no such key,
    /// `.some(nil)` while the first request runs; throws `keyReused` for another body.
    static func stored(_ key: Key, requestHash: Data, on connection: PostgresConnection, logger: Logger) async throws -> Data?? {
        for try await (hash, body) in try await connection.query(
            """
            SELECT request_hash, response_body FROM idempotency_keys
            WHERE user_id = \(key.userID) AND operation = \(key.operation) AND key = \(key.key)
              AND created_at > now() - make_interval(secs => \(keyLifetime.seconds))
            """, logger: logger
        ).decode((Data, Data?).self) {
            guard hash == requestHash else { throw IdempotencyError.keyReused }
            return .some(body)
        }
        return nil
    }

    /// Frees a key whose request ended without an answer to keep, so that a retry runs afresh.
    static func release(_ key: Key, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            DELETE FROM idempotency_keys
            WHERE user_id = \(key.userID) AND operation = \(key.operation) AND key = \(key.key) AND status_code IS NULL
            """, logger: logger)
    }

    /// Housekeeping: keys past their lifetime (a claim reclaims an expired key by itself; this keeps
    /// the table from growing with keys nobody retries).
    static func purgeExpired(database: Database) async throws {
        try await database.deleteInBatches(from: "idempotency_keys", where: "created_at < now() - make_interval(secs => \(Int(keyLifetime.components.seconds)))")
    }
}
