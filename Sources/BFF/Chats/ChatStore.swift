import BFFPlatform
import BFFWire
import Foundation
import Logging
import PostgresNIO

/// A chat as stored; a tombstone when `deletedAt` is set (kept for delta sync).
struct ChatRecord: Sendable, Equatable, Codable {
    let id: UUID
    let title: String
    let subjectID: String?
    let topicID: String?
    let status: String
    let createdMicros: Int64
    let updatedMicros: Int64
    let messageCount: Int
    let lastMessagePreview: String?
    let deleted: Bool

    var createdAt: Date { Date(micros: createdMicros) }
    var updatedAt: Date { Date(micros: updatedMicros) }
}

extension ChatRecord {
    /// A row of `ChatStore.columns`.
    init(row: PostgresRow) throws {
        var cells = BinaryCells(row)
        id = try cells.uuid()
        title = try cells.string()
        subjectID = try cells.optionalString()
        topicID = try cells.optionalString()
        status = try cells.string()
        createdMicros = try cells.timestampMicros()
        updatedMicros = try cells.timestampMicros()
        messageCount = try cells.int()
        lastMessagePreview = try cells.optionalString()
        deleted = try cells.bool()
    }

    /// A page sent as one row of `ChatStore.pageColumns`, in the order of `list`.
    static func page(_ row: PostgresRow, list: KeysetCursor.List) throws -> [ChatRecord] {
        var cells = row.makeIterator()
        return try page(&cells, list: list)
    }

    /// The page in the next ten cells of a row (`pageColumns`).
    static func page(_ cells: inout PostgresRow.Iterator, list: KeysetCursor.List) throws -> [ChatRecord] {
        func array(_ type: PostgresDataType) throws -> BinaryArray {
            guard let cell = cells.next() else { throw BinaryCells.MissingColumn() }
            return try BinaryArray(cell, of: type)
        }
        var ids = try array(.uuid), titles = try array(.text), subjects = try array(.text), topics = try array(.text)
        var statuses = try array(.text), created = try array(.timestamptz), updated = try array(.timestamptz)
        var counts = try array(.int4), previews = try array(.text), deleted = try array(.bool)
        let count = ids.remaining
        guard [titles, subjects, topics, statuses, created, updated, counts, previews, deleted].allSatisfy({ $0.remaining == count })
        else { throw BinaryArray.Malformed(description: "the page's arrays differ in length") }
        var records: [ChatRecord] = []
        records.reserveCapacity(count)
        for _ in 0..<count {
            records.append(
                ChatRecord(
                    id: try ids.uuid(), title: try titles.string(), subjectID: try subjects.optionalString(),
                    topicID: try topics.optionalString(), status: try statuses.string(), createdMicros: try created.timestampMicros(),
                    updatedMicros: try updated.timestampMicros(), messageCount: try counts.int(),
                    lastMessagePreview: try previews.optionalString(), deleted: try deleted.bool()))
        }
        // array_agg keeps the order of its sorted subquery in every PostgreSQL plan we know of, but
        // the SQL standard does not promise it; the check costs one comparison per chat.
        let descending = list != .delta
        if !zip(records, records.dropFirst()).allSatisfy({ descending ? $1.precedes($0) : $0.precedes($1) }) {
            records.sort { descending ? $1.precedes($0) : $0.precedes($1) }
        }
        return records
    }

    /// The keyset order `(updated_at, id)` of the lists, ascending, as PostgreSQL compares uuids (bytewise).
    func precedes(_ other: ChatRecord) -> Bool {
        if updatedMicros != other.updatedMicros { return updatedMicros < other.updatedMicros }
        return withUnsafeBytes(of: id.uuid) { mine in
            withUnsafeBytes(of: other.id.uuid) { theirs in mine.lexicographicallyPrecedes(theirs) }
        }
    }
}

struct MessageRecord: Sendable, Equatable {
    let id: UUID
    let role: String
    let content: String
    let createdMicros: Int64

    var createdAt: Date { Date(micros: createdMicros) }

    static let columns = "id, role, content, created_at"

    /// A row of `MessageRecord.columns`.
    init(row: PostgresRow) throws {
        var cells = BinaryCells(row)
        id = try cells.uuid()
        role = try cells.string()
        content = try cells.string()
        createdMicros = try cells.timestampMicros()
    }
}

struct ChatTagRecord: Sendable, Equatable {
    let tagID: UUID
    let code: String
    let label: String
    let mastery: Double
    let updatedAt: Date
}

/// Chats, messages, evaluations and tags. Every statement names the owner: another user's chat is
/// indistinguishable from a missing one. Timestamps are written at millisecond precision so that a
/// value the client echoes back (RFC 3339 with milliseconds) compares exactly.
struct ChatStore: Sendable {
    let database: Database
    /// First pages go through it: the caller shares one per process, so that concurrent requests meet.
    let firstPages: FirstPageBatcher
    /// Plans the recall an evaluation schedules, in the evaluation's transaction.
    let recalls: RecallScheduler

    init(database: Database, firstPages: FirstPageBatcher, recalls: RecallScheduler = RecallScheduler()) {
        self.database = database
        self.firstPages = firstPages
        self.recalls = recalls
    }

    static let columns = """
        id, title, subject_id, topic_id, status, created_at, updated_at, message_count, last_message_preview, deleted_at IS NOT NULL AS deleted
        """

    /// `columns` as one array each over a subquery named `page` that selects `columns`: the lists
    /// read a page as one row (see `BinaryArray`).
    static let pageColumns = """
        array_agg(id), array_agg(title), array_agg(subject_id), array_agg(topic_id), array_agg(status), array_agg(created_at), \
        array_agg(updated_at), array_agg(message_count), array_agg(last_message_preview), array_agg(deleted)
        """

    private func records(_ query: PostgresQuery) async throws -> [ChatRecord] {
        try await database.run { client in
            let rows = try await client.query(query)
            var records: [ChatRecord] = []
            for try await row in rows { records.append(try ChatRecord(row: row)) }
            return records
        }
    }

    /// A list page: `query` selects `pageColumns`, one row.
    private func page(_ query: PostgresQuery, list: KeysetCursor.List) async throws -> [ChatRecord] {
        try await database.run { client in
            var records: [ChatRecord] = []
            for try await row in try await client.query(query) { records = try ChatRecord.page(row, list: list) }
            return records
        }
    }

    /// Newest first; `limit + 1` rows are read to know whether another page exists.
    func newest(userID: UUID, limit: Int, after cursor: KeysetCursor?) async throws -> [ChatRecord] {
        if let cursor {
            return try await page(
                """
                SELECT \(unescaped: Self.pageColumns) FROM (
                    SELECT \(unescaped: Self.columns) FROM chats
                    WHERE user_id = \(userID) AND deleted_at IS NULL
                      AND (updated_at, id) < (timestamptz 'epoch' + \(cursor.micros) * interval '1 microsecond', \(cursor.id))
                    ORDER BY updated_at DESC, id DESC LIMIT \(limit + 1)) page
                """, list: .newest)
        }
        return try await firstPages.newest(userID: userID, limit: limit + 1)
    }

    /// Delta pull: everything changed after `sinceMicros`, tombstones included, oldest change first.
    func changes(userID: UUID, sinceMicros: Int64, limit: Int, after cursor: KeysetCursor?) async throws -> [ChatRecord] {
        let fromMicros = cursor?.micros ?? sinceMicros
        let fromID = cursor?.id ?? UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255))
        return try await page(
            """
            SELECT \(unescaped: Self.pageColumns) FROM (
                SELECT \(unescaped: Self.columns) FROM chats
                WHERE user_id = \(userID)
                  AND (updated_at, id) > (timestamptz 'epoch' + \(fromMicros) * interval '1 microsecond', \(fromID))
                ORDER BY updated_at, id LIMIT \(limit + 1)) page
            """, list: .delta)
    }

    func find(userID: UUID, chatID: UUID) async throws -> ChatRecord? {
        try await records(
            """
            SELECT \(unescaped: Self.columns) FROM chats WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
            """
        ).first
    }

    func create(
        on connection: PostgresConnection, userID: UUID, title: String, subjectID: String?, topicID: String?,
        logger: Logger
    ) async throws -> ChatRecord {
        let rows = try await connection.query(
            """
            INSERT INTO chats (user_id, title, subject_id, topic_id, created_at, updated_at)
            SELECT \(userID), \(title), \(subjectID), \(topicID), stamp.at, stamp.at FROM (SELECT bff_chat_stamp(\(userID)) AS at) stamp
            RETURNING \(unescaped: Self.columns)
            """, logger: logger)
        for try await row in rows { return try ChatRecord(row: row) }
        throw DatabaseUnavailable(reason: "chat insert returned no row")
    }

    enum RenameOutcome: Sendable { case renamed(ChatRecord), stale, missing }

    /// Renames unless the client's copy is older than the stored one (§8.6: the newer edit wins).
    func rename(userID: UUID, chatID: UUID, title: String, clientUpdatedAt: Date?) async throws -> RenameOutcome {
        // The stored stamp as the client was sent it (whole milliseconds, cut off) against the client's
        // to the microsecond: an echoed stamp passes, and so does a later one, but nothing earlier.
        let clientMicros = try clientUpdatedAt.map { try RFC3339Dates.micros($0, field: "updated_at") }
        let updated = try await records(
            """
            UPDATE chats SET title = \(title), updated_at = bff_chat_stamp(\(userID))
            WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
              AND (\(clientMicros)::int8 IS NULL
                   OR floor(extract(epoch FROM updated_at) * 1000)::int8 * 1000 <= \(clientMicros)::int8)
            RETURNING \(unescaped: Self.columns)
            """)
        if let chat = updated.first { return .renamed(chat) }
        return try await find(userID: userID, chatID: chatID) == nil ? .missing : .stale
    }

    /// Soft delete: the row stays as a tombstone for delta sync; messages and tags go.
    func delete(userID: UUID, chatID: UUID) async throws -> Bool {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                let rows = try await connection.query(
                    """
                    UPDATE chats SET deleted_at = now(), title = 'deleted', last_message_preview = NULL, message_count = 0,
                        updated_at = bff_chat_stamp(\(userID))
                    WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
                    RETURNING id
                    """, logger: database.logger)
                var found = false
                for try await _ in rows { found = true }
                guard found else { return false }
                _ = try await connection.query(
                    "DELETE FROM messages WHERE chat_id = \(chatID) AND user_id = \(userID)", logger: database.logger)
                _ = try await connection.query(
                    "DELETE FROM chat_tags WHERE chat_id = \(chatID) AND user_id = \(userID)", logger: database.logger)
                _ = try await connection.query(
                    "DELETE FROM chat_evaluations WHERE chat_id = \(chatID) AND user_id = \(userID)", logger: database.logger)
                try await RecallStore.cancel(chatID: chatID, userID: userID, on: connection, logger: database.logger)
                return true
            }
        }
    }

    /// Appends a message and keeps the chat's counters (tests seed histories with it; the tutoring turn
    /// stores its two messages in one statement of its own).
    func appendMessage(userID: UUID, chatID: UUID, role: String, content: String) async throws -> MessageRecord? {
        try await database.run { client in
            let rows = try await client.query(
                """
                WITH chat AS (
                    UPDATE chats SET message_count = message_count + 1, last_message_preview = left(\(content), 140),
                        updated_at = bff_chat_stamp(\(userID))
                    WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
                    RETURNING id, user_id
                )
                INSERT INTO messages (chat_id, user_id, role, content, created_at)
                SELECT id, user_id, \(role), \(content), clock_timestamp() FROM chat
                RETURNING \(unescaped: MessageRecord.columns)
                """)
            for try await row in rows { return try MessageRecord(row: row) }
            return nil
        }
    }

    /// Oldest first, after the cursor; nil when the chat is not the user's.
    func messages(userID: UUID, chatID: UUID, limit: Int, after cursor: KeysetCursor?) async throws -> [MessageRecord]? {
        guard try await find(userID: userID, chatID: chatID) != nil else { return nil }
        let query: PostgresQuery
        if let cursor {
            query = """
                SELECT \(unescaped: MessageRecord.columns) FROM messages
                WHERE chat_id = \(chatID) AND user_id = \(userID)
                  AND (created_at, id) > (timestamptz 'epoch' + \(cursor.micros) * interval '1 microsecond', \(cursor.id))
                ORDER BY created_at, id LIMIT \(limit + 1)
                """
        } else {
            query = """
                SELECT \(unescaped: MessageRecord.columns) FROM messages
                WHERE chat_id = \(chatID) AND user_id = \(userID)
                ORDER BY created_at, id LIMIT \(limit + 1)
                """
        }
        return try await database.run { client in
            let rows = try await client.query(query)
            var messages: [MessageRecord] = []
            for try await row in rows { messages.append(try MessageRecord(row: row)) }
            return messages
        }
    }

    /// The chat's tags, labelled in `language`.
    func tags(userID: UUID, chatID: UUID, language: Language = .default) async throws -> [ChatTagRecord]? {
        guard try await find(userID: userID, chatID: chatID) != nil else { return nil }
        return try await database.run { client in
            try await Self.tags(on: client, userID: userID, chatID: chatID, language: language)
        }
    }

    static func tags(on client: PostgresClient, userID: UUID, chatID: UUID, language: Language) async throws -> [ChatTagRecord] {
        let rows = try await client.query(
            """
            SELECT t.id, t.code, bff_catalogue_name(\(language.rawValue), t.label, t.label_ja, t.label_en), ct.mastery, ct.updated_at
            FROM chat_tags ct JOIN tags t ON t.id = ct.tag_id
            WHERE ct.chat_id = \(chatID) AND ct.user_id = \(userID)
            ORDER BY t.code
            """)
        var tags: [ChatTagRecord] = []
        for try await (id, code, label, mastery, updatedAt) in rows.decode((UUID, String, String, Double, Date).self) {
            tags.append(ChatTagRecord(tagID: id, code: code, label: label, mastery: mastery, updatedAt: updatedAt))
        }
        return tags
    }

    /// Links a misconception tag to a chat (written by the tutoring turn; tests use it directly).
    func attachTag(userID: UUID, chatID: UUID, code: String, mastery: Double = 0) async throws {
        try await database.run { client in
            _ = try await client.query(
                """
                INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery)
                SELECT c.id, t.id, c.user_id, \(mastery) FROM chats c, tags t
                WHERE c.id = \(chatID) AND c.user_id = \(userID) AND c.deleted_at IS NULL AND t.code = \(code)
                -- Waits for a delete in flight and sees its outcome: the foreign key's own lock
                -- does not conflict with the delete's, and the snapshot would still show the chat.
                FOR SHARE OF c
                ON CONFLICT (chat_id, tag_id) DO NOTHING
                """)
        }
    }

    struct EvaluationRecord: Sendable {
        let score: Int
        let note: String?
        let createdAt: Date
        let tags: [ChatTagRecord]
    }

    /// Stores the learner's rating, ends the chat and moves each tag's mastery halfway towards the
    /// rating (score 1 → 0, score 5 → 1) from where it stood before the chat's first evaluation: a
    /// repeat replaces the rating and its effect, and a retry leaves mastery where the first request
    /// put it (migration 0011).
    /// Nil when the chat is not the user's.
    func evaluate(userID: UUID, chatID: UUID, score: Int, note: String?, language: Language = .default) async throws -> EvaluationRecord? {
        let target = Double(score - 1) / 4
        return try await database.run { client in
            let stored: (Date)? = try await client.withTransaction(logger: database.logger) { connection in
                let ended = try await connection.query(
                    """
                    UPDATE chats SET status = 'ended',
                        updated_at = bff_chat_stamp(\(userID))
                    WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
                    RETURNING id
                    """, logger: database.logger)
                var found = false
                for try await _ in ended { found = true }
                guard found else { return nil }
                let evaluation = try await connection.query(
                    """
                    INSERT INTO chat_evaluations (chat_id, user_id, score, note) VALUES (\(chatID), \(userID), \(score), \(note))
                    ON CONFLICT (chat_id) DO UPDATE SET score = excluded.score, note = excluded.note, updated_at = now()
                    RETURNING updated_at
                    """, logger: database.logger)
                var at: Date?
                for try await value in evaluation.decode(Date.self) { at = value }
                _ = try await connection.query(
                    """
                    UPDATE chat_tags SET
                        mastery_before_evaluation = coalesce(mastery_before_evaluation, mastery),
                        mastery = least(1, greatest(0, coalesce(mastery_before_evaluation, mastery)
                                                       + 0.5 * (\(target) - coalesce(mastery_before_evaluation, mastery)))),
                        updated_at = now()
                    WHERE chat_id = \(chatID) AND user_id = \(userID)
                    """, logger: database.logger)
                // The evaluation and its re-recall commit together or not at all.
                _ = try await recalls.scheduleNext(
                    on: connection, userID: userID, chatID: chatID, score: score, previous: nil, logger: database.logger)
                return at
            }
            guard let createdAt = stored else { return nil }
            let tags = try await Self.tags(on: client, userID: userID, chatID: chatID, language: language)
            return EvaluationRecord(score: score, note: note, createdAt: createdAt, tags: tags)
        }
    }
}

/// What other capabilities read from and change in a chat: a re-recall inside its own transaction
/// (`RecallStore`), the tags' extraction job (`TagExtraction`). This file owns `chats`,
/// `messages` and `chat_tags`, so their statements live here.
extension ChatStore {
    /// The chat's newest 200 messages of the learner and the AI, oldest first: the dialogue the
    /// tags are read from (the turn reads the same rows within its one query, `TurnStore.snapshot`).
    static func dialogue(_ client: PostgresClient, chatID: UUID, userID: UUID, logger: Logger) async throws -> [LLMMessage] {
        var dialogue: [LLMMessage] = []
        for try await (role, content) in try await client.query(
            """
            SELECT role, content FROM (
                SELECT role, content, created_at, id FROM messages
                WHERE chat_id = \(chatID) AND user_id = \(userID) AND role IN ('user', 'assistant')
                ORDER BY created_at DESC, id DESC LIMIT 200
            ) newest ORDER BY created_at, id
            """, logger: logger
        ).decode((String, String).self) {
            dialogue.append(LLMMessage(role: role == "user" ? .user : .assistant, content: content))
        }
        return dialogue
    }

    /// Tags the chat with the catalogue's `codes` (found in its dialogue), each once; nothing for a
    /// chat deleted meanwhile.
    static func tag(chatID: UUID, userID: UUID, codes: [String], database: Database, logger: Logger) async throws {
        try await database.run { client in
            _ = try await client.query(
                """
                INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery)
                SELECT c.id, t.id, c.user_id, 0 FROM chats c, tags t
                WHERE c.id = \(chatID) AND c.user_id = \(userID) AND c.deleted_at IS NULL AND t.code = ANY(\(codes))
                FOR SHARE OF c
                ON CONFLICT (chat_id, tag_id) DO NOTHING
                """, logger: logger)
        }
    }

    /// An opened recall reopens its ended chat for the re-recall conversation.
    static func reopen(chatID: UUID, userID: UUID, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            UPDATE chats SET status = 'in_progress', updated_at = bff_chat_stamp(\(userID))
            WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL AND status <> 'in_progress'
            """, logger: logger)
    }

    /// The re-evaluation: each tag's mastery moves halfway towards the score from where it stands now
    /// (a later evaluation of the chat starts from here too), and the chat ends again.
    static func reevaluated(chatID: UUID, userID: UUID, score: Int, on connection: PostgresConnection, logger: Logger) async throws {
        let target = Double(score - 1) / 4
        _ = try await connection.query(
            """
            UPDATE chat_tags SET mastery = least(1, greatest(0, mastery + 0.5 * (\(target) - mastery))),
                mastery_before_evaluation = NULL, updated_at = now()
            WHERE chat_id = \(chatID) AND user_id = \(userID)
            """, logger: logger)
        _ = try await connection.query(
            """
            UPDATE chats SET status = 'ended', updated_at = bff_chat_stamp(\(userID))
            WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
            """, logger: logger)
    }
}
