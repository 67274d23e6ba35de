import BFFPlatform
import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// Why an export could not start.
enum ExportRefusal: Error, Equatable {
    /// The account of the caller's token no longer exists.
    case accountGone
    /// Another export of the learner's still holds the lease; it may be retried after that many seconds.
    case exportRunning(retryAfter: Double)
}

/// `GET /api/v1/me/export` (data portability): everything the service holds about the caller as one
/// JSON document, written to the response as it is read.
///
/// PostgreSQL renders each row (`row_to_json`), so a column added later is exported without a change
/// here. Rows are read in pages, each page in a database use of its own and written before the next
/// is read: memory holds one page, however many messages the account has, and a slow reader holds
/// no database connection.
struct AccountExport: NativeRoute {
    let database: Database
    let logger: Logger

    static let method = HTTPRequest.Method.get
    static let path = "/api/v1/me/export"
    /// Below every id: the first page's keyset.
    private static let noID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    /// Rows per page (messages can be 8,000 characters: a page stays within a few MiB).
    static let pageSize = 500

    func respond(to request: Request, context: AppRequestContext) async throws -> Response {
        let principal = try context.principal()
        // The account must exist before the first byte (afterwards an error can only cut the body):
        // the lease is taken only for an account that does.
        let taken = try await ExportLease.take(userID: principal.userID, export: self)
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store", .contentDisposition: #"attachment; filename="export.json""#],
            body: .init { writer in
                var lease = taken
                do {
                    try await write(userID: principal.userID, to: &writer, lease: &lease)
                    try await writer.finish(nil)
                } catch {
                    await lease.release(export: self)
                    throw error
                }
                await lease.release(export: self)
            })
    }

    /// The whole document, written to `writer` in pieces of about 64 KiB.
    func write(userID: UUID, to writer: inout some ResponseBodyWriter, lease: inout ExportLease) async throws {
        var out = Output()
        let now = try RFC3339Dates().encode(Date())
        out.append(#"{"format":"bff-export-1","exported_at":"\#(now)","user":"#)
        out.append(try await one("SELECT row_to_json(u)::text FROM (SELECT id, email, display_name, created_at, updated_at FROM users WHERE id = \(userID)) u") ?? "null")
        out.append(#","entitlement":"#)
        out.append(try await one("SELECT row_to_json(e)::text FROM (SELECT plan, status, access_until, will_renew, synced_at FROM entitlements WHERE user_id = \(userID)) e") ?? "null")
        out.append(#","settings":"#)
        out.append(try await one("SELECT row_to_json(s)::text FROM user_settings s WHERE user_id = \(userID)") ?? "null")
        try await section(
            "subject_preferences", into: &out, writer: &writer,
            "SELECT row_to_json(p)::text FROM user_subject_prefs p WHERE user_id = \(userID) ORDER BY subject_id")
        try await section("devices", into: &out, writer: &writer, "SELECT row_to_json(d)::text FROM devices d WHERE user_id = \(userID) ORDER BY created_at, device_id")
        // The push tokens themselves are credentials of the push services, not the learner's data.
        try await section(
            "push_registrations", into: &out, writer: &writer,
            """
            SELECT row_to_json(t)::text FROM (
                SELECT platform, device_id, created_at, updated_at FROM push_tokens WHERE user_id = \(userID) ORDER BY created_at, device_id
            ) t
            """)
        try await section(
            "subscriptions", into: &out, writer: &writer,
            """
            SELECT row_to_json(r)::text FROM (
                SELECT product_id, store, platform, status, purchase_at, expires_at, will_renew, period_type, unsubscribed_at, billing_issue_at,
                       grace_until, refunded_at, resumes_at, sandbox, created_at, updated_at
                FROM iap_receipts WHERE user_id = \(userID) ORDER BY purchase_at
            ) r
            """)
        try await section("recalls", into: &out, writer: &writer, "SELECT row_to_json(r)::text FROM recalls r WHERE user_id = \(userID) ORDER BY created_at, id")
        // What the achievements keep: their fold and last answer, the trophies with the moments they
        // were unlocked, and the days a streak push was sent (a bounded handful of rows each).
        out.append(#","achievements":"#)
        out.append(
            try await one(
                """
                SELECT json_build_object(
                    'progress', (SELECT row_to_json(p) FROM achievement_progress p WHERE p.user_id = \(userID)),
                    'trophies', coalesce((
                        SELECT json_agg(t ORDER BY t.unlocked_at, t.code)
                        FROM (SELECT code, unlocked_at, recorded_at FROM trophy_unlocks WHERE user_id = \(userID)) t), '[]'::json),
                    'streak_pushes', coalesce((
                        SELECT json_agg(s ORDER BY s.day)
                        FROM (SELECT day, streak, sent_at, created_at FROM streak_pushes WHERE user_id = \(userID)) s), '[]'::json)
                )::text
                """) ?? "null")
        out.append(#","chats":["#)
        try await chats(userID: userID, into: &out, writer: &writer, lease: &lease)
        out.append("]}")
        try await out.flush(to: &writer)
    }

    /// The chats, each with its evaluation, tags and messages: a page of chats per query, and the
    /// messages of that page's chats in pages of their own, so that the queries grow with the
    /// messages read, not with the chats.
    private func chats(userID: UUID, into out: inout Output, writer: inout some ResponseBodyWriter, lease: inout ExportLease) async throws {
        var after: (Date, UUID)?
        var first = true
        while true {
            try await lease.renewIfDue(export: self)
            let (since, sinceID) = after ?? (.distantPast, Self.noID)
            let page: [(Date, UUID, String, String?, String)] = try await database.run { client in
                var rows: [(Date, UUID, String, String?, String)] = []
                for try await row in try await client.query(
                    """
                    SELECT c.created_at, c.id, row_to_json(c)::text,
                           (SELECT row_to_json(e)::text FROM chat_evaluations e WHERE e.chat_id = c.id AND e.user_id = c.user_id),
                           coalesce((SELECT json_agg(t ORDER BY t.tag_id)::text FROM chat_tags t WHERE t.chat_id = c.id AND t.user_id = c.user_id), '[]')
                    FROM chats c
                    WHERE c.user_id = \(userID) AND (c.created_at, c.id) > (\(since), \(sinceID))
                    ORDER BY c.created_at, c.id LIMIT \(Self.chatPageSize)
                    """, logger: logger
                ).decode((Date, UUID, String, String?, String).self) { rows.append(row) }
                return rows
            }
            var messages = MessagePages(chatIDs: page.map(\.1))
            for (_, chatID, chat, evaluation, tags) in page {
                out.append(first ? "" : ",")
                first = false
                out.append(#"{"chat":"#)
                out.append(chat)
                out.append(#","evaluation":"#)
                out.append(evaluation ?? "null")
                out.append(#","tags":"#)
                out.append(tags)
                out.append(#","messages":["#)
                var firstMessage = true
                while let message = try await messages.next(of: chatID, userID: userID, export: self) {
                    out.append(firstMessage ? "" : ",")
                    firstMessage = false
                    out.append(message)
                    try await out.flushIfFull(to: &writer)
                }
                out.append("]}")
                try await out.flushIfFull(to: &writer)
            }
            guard page.count == Self.chatPageSize, let last = page.last else { return }
            after = (last.0, last.1)
        }
    }

    /// The learner's one running export (`account_export_leases`): taken before the first byte
    /// (`ExportRefusal`: 401 for an account that no longer exists, 429 `rate_limited` while another
    /// export runs), renewed as pages are read, released at the end or on failure; a crashed
    /// server's lease runs out after `duration`.
    struct ExportLease: Sendable {
        let userID: UUID
        let holder = UUID()
        private var renewedAt = ContinuousClock.now
        static let duration: TimeInterval = 120

        private init(userID: UUID) { self.userID = userID }

        static func take(userID: UUID, export: AccountExport) async throws -> ExportLease {
            let lease = ExportLease(userID: userID)
            // One round trip: whether the account exists, and the lease for it.
            let (exists, taken) = try await export.database.run { client in
                for try await row in try await client.query(
                    """
                    WITH account AS (SELECT id FROM users WHERE id = \(userID)),
                    taken AS (
                        INSERT INTO account_export_leases (user_id, holder, lease_until)
                        SELECT id, \(lease.holder), now() + make_interval(secs => \(duration)) FROM account
                        ON CONFLICT (user_id) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
                        WHERE account_export_leases.lease_until < now()
                        RETURNING 1
                    )
                    SELECT EXISTS (SELECT 1 FROM account), EXISTS (SELECT 1 FROM taken)
                    """, logger: export.logger
                ).decode((Bool, Bool).self) { return row }
                return (false, false)
            }
            guard exists else { throw ExportRefusal.accountGone }
            guard taken else { throw ExportRefusal.exportRunning(retryAfter: 30) }
            return lease
        }

        mutating func renewIfDue(export: AccountExport) async throws {
            guard ContinuousClock.now - renewedAt > .seconds(30) else { return }
            renewedAt = ContinuousClock.now
            try await export.database.run { [userID, holder] client in
                _ = try await client.query(
                    """
                    UPDATE account_export_leases SET lease_until = now() + make_interval(secs => \(Self.duration))
                    WHERE user_id = \(userID) AND holder = \(holder)
                    """, logger: export.logger)
            }
        }

        /// Best effort: a lease left behind runs out by itself.
        func release(export: AccountExport) async {
            do {
                try await export.database.run { [userID, holder] client in
                    _ = try await client.query(
                        "DELETE FROM account_export_leases WHERE user_id = \(userID) AND holder = \(holder)", logger: export.logger)
                }
            } catch {
                export.logger.warning("the export's lease was not released; it runs out by itself", metadata: ["error": .string(LoggableError.describe(error))])
            }
        }
    }

    /// Chats per page: their messages are read together, in pages of `pageSize`.
    static let chatPageSize = 100

    /// The messages of one page of chats, read `pageSize` at a time in the page's chat order (then
    /// oldest first), each query for the chats not yet finished.
    private struct MessagePages {
        let chatIDs: [UUID]
        private var buffered: [(chatID: UUID, json: String)] = []
        private var index = 0
        /// The last message read: the keyset of the next page.
        private var last: (chatID: UUID, createdAt: Date, id: UUID)?
        private var exhausted = false

        init(chatIDs: [UUID]) { self.chatIDs = chatIDs }

        /// The next message of `chatID`, nil once that chat has no more.
        mutating func next(of chatID: UUID, userID: UUID, export: AccountExport) async throws -> String? {
            while true {
                if index < buffered.count {
                    guard buffered[index].chatID == chatID else { return nil }
                    defer { index += 1 }
                    return buffered[index].json
                }
                guard !exhausted else { return nil }
                try await read(userID: userID, export: export)
            }
        }

        private mutating func read(userID: UUID, export: AccountExport) async throws {
            let remaining = last.map { last in Array(chatIDs.drop { $0 != last.chatID }) } ?? chatIDs
            let current = last?.chatID ?? Self.noChat
            let (since, sinceID) = last.map { ($0.createdAt, $0.id) } ?? (.distantPast, Self.noChat)
            let rows: [(UUID, Date, UUID, String)] = try await export.database.run { client in
                var rows: [(UUID, Date, UUID, String)] = []
                for try await row in try await client.query(
                    """
                    SELECT m.chat_id, m.created_at, m.id, row_to_json(m)::text FROM messages m
                    WHERE m.user_id = \(userID) AND m.chat_id = ANY(\(remaining))
                      AND (m.chat_id <> \(current) OR (m.created_at, m.id) > (\(since), \(sinceID)))
                    ORDER BY array_position(\(remaining), m.chat_id), m.created_at, m.id
                    LIMIT \(AccountExport.pageSize)
                    """, logger: export.logger
                ).decode((UUID, Date, UUID, String).self) { rows.append(row) }
                return rows
            }
            buffered = rows.map { ($0.0, $0.3) }
            index = 0
            exhausted = rows.count < AccountExport.pageSize
            if let row = rows.last { last = (row.0, row.1, row.2) }
        }

        private static let noChat = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    /// `,"name":[rows]` for a section small enough to read at once (bounded per user).
    private func section(_ name: String, into out: inout Output, writer: inout some ResponseBodyWriter, _ query: PostgresQuery) async throws {
        let rows: [String] = try await database.run { client in
            var rows: [String] = []
            for try await row in try await client.query(query, logger: logger).decode(String.self) { rows.append(row) }
            return rows
        }
        out.append(#","\#(name)":["#)
        out.append(rows.joined(separator: ","))
        out.append("]")
        try await out.flushIfFull(to: &writer)
    }

    private func one(_ query: PostgresQuery) async throws -> String? {
        try await database.run { client in
            for try await row in try await client.query(query, logger: logger).decode(String?.self) { return row }
            return nil
        }
    }

    /// The document's next bytes, handed on in pieces.
    private struct Output {
        var buffer = ByteBuffer()

        mutating func append(_ text: String) { buffer.writeString(text) }

        mutating func flushIfFull(to writer: inout some ResponseBodyWriter) async throws {
            if buffer.readableBytes >= 64 * 1024 { try await flush(to: &writer) }
        }

        mutating func flush(to writer: inout some ResponseBodyWriter) async throws {
            guard buffer.readableBytes > 0 else { return }
            try await writer.write(buffer)
            buffer = ByteBuffer()
        }
    }
}
