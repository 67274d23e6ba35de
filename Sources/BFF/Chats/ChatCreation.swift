import Crypto
import Foundation
import Logging
import PostgresNIO

/// Creating a chat, idempotently: with an `Idempotency-Key` the first response is stored with a hash of
/// the request, in the same transaction as the chat, and a retry with the same key and body gets that
/// response back. A concurrent duplicate waits on the key's row lock and then replays.
struct ChatCreation: Sendable {
    let database: Database
    let repository: ChatRepository
    static let operation = "createChat"
    /// How long a key is kept: a retry within it replays, and the key is free again after it.
    static let keyLifetimeSeconds = 24 * 3600

    struct Request: Codable, Sendable {
        let title: String?
        let subjectID: String?
        let topicID: String?
    }

    enum Outcome: Sendable {
        case created(ChatRecord)
        case replayed(ChatRecord)
    }

    func create(userID: UUID, request: Request, idempotencyKey: String?) async throws -> Outcome {
        let title = try Self.title(request.title)
        try IdempotencyRequest.check(idempotencyKey)
        let requestHash = try IdempotencyRequest.hash(request)
        let logger = database.logger
        return try await database.run { client in
            try await client.withTransaction(logger: logger) { connection -> Outcome in
                if let key = idempotencyKey {
                    // A key older than 24 hours is free again.
                    let claimed = try await connection.query(
                        """
                        INSERT INTO idempotency_keys (user_id, operation, key, request_hash)
                        VALUES (\(userID), \(Self.operation), \(key), \(requestHash))
                        ON CONFLICT (user_id, operation, key) DO UPDATE
                            SET request_hash = excluded.request_hash, status_code = NULL, response_body = NULL, created_at = now()
                            WHERE idempotency_keys.created_at < now() - make_interval(secs => \(Self.keyLifetimeSeconds))
                        RETURNING 1
                        """, logger: logger)
                    var owned = false
                    for try await _ in claimed { owned = true }
                    if !owned { return try await Self.replay(connection, userID: userID, key: key, requestHash: requestHash, logger: logger) }
                }
                let (subjectID, topicID) = try await Self.catalogue(connection, subjectID: request.subjectID, topicID: request.topicID, logger: logger)
                let chat = try await repository.create(
                    on: connection, userID: userID, title: title, subjectID: subjectID, topicID: topicID, logger: logger)
                if let key = idempotencyKey {
                    let body = try JSONEncoder().encode(chat)
                    _ = try await connection.query(
                        """
                        UPDATE idempotency_keys SET status_code = 201, response_body = \(body)
                        WHERE user_id = \(userID) AND operation = \(Self.operation) AND key = \(key)
                        """, logger: logger)
                }
                return .created(chat)
            }
        }
    }

    private static func replay(_ connection: PostgresConnection, userID: UUID, key: String, requestHash: Data, logger: Logger) async throws -> Outcome {
        let rows = try await connection.query(
            """
            SELECT request_hash, response_body FROM idempotency_keys
            WHERE user_id = \(userID) AND operation = \(operation) AND key = \(key)
            """, logger: logger)
        for try await (hash, body) in rows.decode((Data, Data?).self) {
            guard hash == requestHash else {
                throw IdempotencyError.keyReused
            }
            // The first response as it was, even when its chat has been deleted since: a client that
            // lost it learns of the deletion from the delta pull, as of any other.
            guard let body, let chat = try? JSONDecoder().decode(ChatRecord.self, from: body) else { break }
            return .replayed(chat)
        }
        throw IdempotencyError.inProgress
    }

    /// The subject and topic must exist and agree; a topic alone implies its subject.
    static func catalogue(
        _ connection: PostgresConnection, subjectID: String?, topicID: String?,
        logger: Logger
    ) async throws -> (String?, String?) {
        var subject = subjectID
        if let subjectID {
            let rows = try await connection.query("SELECT 1 FROM subjects WHERE id = \(subjectID)", logger: logger)
            var exists = false
            for try await _ in rows { exists = true }
            guard exists else { throw CatalogueError.unknownSubject(field: "subject_id") }
        }
        if let topicID {
            let rows = try await connection.query("SELECT subject_id FROM topics WHERE id = \(topicID)", logger: logger)
            var owner: String?
            for try await value in rows.decode(String.self) { owner = value }
            guard let owner else { throw CatalogueError.unknownTopic(field: "topic_id", problem: "no such topic.") }
            if let subject, subject != owner {
                throw CatalogueError.unknownTopic(field: "topic_id", problem: "the topic belongs to another subject.")
            }
            subject = owner
        }
        return (subject, topicID)
    }

    /// Trimmed, 1–200 characters, no control characters; absent → a dated default.
    static func title(_ raw: String?) throws -> String {
        guard let raw else {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "Asia/Tokyo")
            formatter.dateFormat = "yyyy-MM-dd HH:mm"
            return "Chat \(formatter.string(from: Date()))"
        }
        let title = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        // Code points, as PostgreSQL's length() (the CHECK) and JSON Schema's maxLength count them.
        guard (1...200).contains(title.unicodeScalars.count) else { throw APIError.validation("title", "must be 1-200 characters after trimming") }
        // C0 controls and DEL, as the contract's pattern states.
        guard !title.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw APIError.validation("title", "must not contain control characters")
        }
        return title
    }

    /// Housekeeping: keys past their lifetime (a create reclaims an expired key by itself; this keeps
    /// the table from growing with keys nobody retries).
    static func purgeExpiredKeys(database: Database) async throws {
        try await database.deleteInBatches(
            from: "idempotency_keys", where: "created_at < now() - make_interval(secs => \(keyLifetimeSeconds))")
    }
}
