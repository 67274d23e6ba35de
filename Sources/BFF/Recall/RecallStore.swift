import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// A recall as the API shows it.
struct RecallRecord: Sendable, Equatable {
    struct Tag: Sendable, Equatable {
        let id: UUID
        let code: String
        let label: String
    }

    let id: UUID
    let chatID: UUID
    let chatTitle: String
    var tags: [Tag]
    let dueAt: Date
    let status: String
}

/// Why a recall cannot be opened or evaluated.
enum RecallRefusal: Error, Equatable {
    case missing, done, canceled
}

/// The recall API's reads and writes; every statement filters by the caller's id.
struct RecallStore: Sendable {
    let database: Database
    let scheduler: RecallScheduler

    static let statuses: Set<String> = ["scheduled", "sent", "opened", "done", "canceled"]

    /// Soonest `due_at` first; `limit + 1` rows are read to know whether another page exists.
    /// Tags are labelled in `language`, as `find` and `evaluate` label them.
    func list(
        userID: UUID, statuses: [String], limit: Int, after cursor: KeysetCursor?, language: Language = .default
    ) async throws -> [RecallRecord] {
        let filter = statuses.isEmpty ? nil : statuses
        let afterMicros = cursor?.micros
        let afterID = cursor?.id
        return try await read(
            """
            SELECT r.id, r.chat_id, c.title, r.due_at, r.status
            FROM recalls r JOIN chats c ON c.id = r.chat_id AND c.user_id = r.user_id
            WHERE r.user_id = \(userID) AND (\(filter)::text[] IS NULL OR r.status = ANY(\(filter)::text[]))
              AND (\(afterMicros)::int8 IS NULL
                   OR (r.due_at, r.id) > (timestamptz 'epoch' + \(afterMicros)::int8 * interval '1 microsecond', \(afterID)::uuid))
            ORDER BY r.due_at, r.id LIMIT \(limit + 1)
            """, userID: userID, language: language)
    }

    func find(userID: UUID, recallID: UUID, language: Language = .default) async throws -> RecallRecord? {
        try await read(
            """
            SELECT r.id, r.chat_id, c.title, r.due_at, r.status
            FROM recalls r JOIN chats c ON c.id = r.chat_id AND c.user_id = r.user_id
            WHERE r.user_id = \(userID) AND r.id = \(recallID)
            """, userID: userID, language: language
        ).first
    }

    private func read(_ query: PostgresQuery, userID: UUID, language: Language) async throws -> [RecallRecord] {
        try await database.run { client in
            var recalls: [RecallRecord] = []
            for try await (id, chatID, title, dueAt, status) in try await client.query(query, logger: database.logger)
                .decode((UUID, UUID, String, Date, String).self)
            {
                recalls.append(RecallRecord(id: id, chatID: chatID, chatTitle: title, tags: [], dueAt: dueAt, status: status))
            }
            guard !recalls.isEmpty else { return [] }
            var tags: [UUID: [RecallRecord.Tag]] = [:]
            for try await (chatID, tagID, code, label) in try await client.query(
                """
                SELECT ct.chat_id, t.id, t.code, bff_catalogue_name(\(language.rawValue), t.label, t.label_ja, t.label_en)
                FROM chat_tags ct JOIN tags t ON t.id = ct.tag_id
                WHERE ct.user_id = \(userID) AND ct.chat_id = ANY(\(Array(Set(recalls.map(\.chatID)))))
                ORDER BY t.code
                """, logger: database.logger
            ).decode((UUID, UUID, String, String).self) {
                tags[chatID, default: []].append(.init(id: tagID, code: code, label: label))
            }
            for index in recalls.indices { recalls[index].tags = tags[recalls[index].chatID] ?? [] }
            return recalls
        }
    }

    /// Takes the user's chat-stamp lock (`bff_chat_stamp`) before any row: deleting or evaluating a
    /// chat takes it first and then locks the chat and its recalls, while a recall's writes lock
    /// the recall and then the chat. Without it the two orders deadlocked under concurrent calls
    /// (found by the contract run: 500 on markRecallOpened).
    static func serialiseWithChatWrites(userID: UUID, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("SELECT bff_chat_stamp(\(userID))", logger: logger)
    }

    /// The app opened the recall's deep link: scheduled or sent becomes opened, and its chat takes
    /// turns again until the recall is evaluated. Opening again changes nothing.
    func open(userID: UUID, recallID: UUID) async throws {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                try await Self.serialiseWithChatWrites(userID: userID, on: connection, logger: database.logger)
                var opened: (chatID: UUID, sentAt: Date?)?
                for try await row in try await connection.query(
                    """
                    UPDATE recalls SET status = 'opened', opened_at = now(), updated_at = now()
                    WHERE id = \(recallID) AND user_id = \(userID) AND status IN ('scheduled', 'sent')
                    RETURNING chat_id, sent_at
                    """, logger: database.logger
                ).decode((UUID, Date?).self) { opened = (row.0, row.1) }
                if let opened {
                    try await ChatStore.reopen(chatID: opened.chatID, userID: userID, on: connection, logger: database.logger)
                    return
                }
                switch try await Self.status(on: connection, userID: userID, recallID: recallID, logger: database.logger) {
                case nil: throw RecallRefusal.missing
                case "canceled": throw RecallRefusal.canceled
                default: return
                }
            }
        }
    }

    /// Records the re-evaluation: the recall is done, the chat's tags move halfway towards the score
    /// from where they stand, the chat ends again, and the next recall is scheduled and returned.
    func evaluate(userID: UUID, recallID: UUID, score: Int, note: String?, language: Language = .default) async throws -> RecallRecord {
        let planned = try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                try await Self.serialiseWithChatWrites(userID: userID, on: connection, logger: database.logger)
                var done: (chatID: UUID, step: Int, interval: Double)?
                for try await row in try await connection.query(
                    """
                    UPDATE recalls SET status = 'done', score = \(score)::smallint, note = \(note), done_at = now(), updated_at = now()
                    WHERE id = \(recallID) AND user_id = \(userID) AND status IN ('scheduled', 'sent', 'opened')
                    RETURNING chat_id, step, interval_seconds
                    """, logger: database.logger
                ).decode((UUID, Int32, Double).self) { done = (row.0, Int(row.1), row.2) }
                guard let done else {
                    switch try await Self.status(on: connection, userID: userID, recallID: recallID, logger: database.logger) {
                    case nil: throw RecallRefusal.missing
                    case "canceled": throw RecallRefusal.canceled
                    default: throw RecallRefusal.done
                    }
                }
                try await ChatStore.reevaluated(chatID: done.chatID, userID: userID, score: score, on: connection, logger: database.logger)
                return try await scheduler.scheduleNext(
                    on: connection, userID: userID, chatID: done.chatID, score: score,
                    previous: .init(step: done.step, intervalSeconds: done.interval), logger: database.logger)
            }
        }
        guard let next = try await find(userID: userID, recallID: planned.id, language: language) else { throw RecallRefusal.missing }
        return next
    }

    /// The chat was deleted: its pending recalls end, in the deletion's transaction.
    static func cancel(chatID: UUID, userID: UUID, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            UPDATE recalls SET status = 'canceled', updated_at = now()
            WHERE chat_id = \(chatID) AND user_id = \(userID) AND status IN ('scheduled', 'sent', 'opened')
            """, logger: logger)
    }

    private static func status(on connection: PostgresConnection, userID: UUID, recallID: UUID, logger: Logger) async throws -> String? {
        for try await status in try await connection.query(
            "SELECT status FROM recalls WHERE id = \(recallID) AND user_id = \(userID)", logger: logger
        ).decode(String.self) { return status }
        return nil
    }
}
