import Foundation
import Hummingbird
import Logging
import NIOCore
import PostgresNIO

/// `GET /api/v1/me/export` (data portability): everything the service holds about the caller as one
/// JSON document, written to the response as it is read.
///
/// PostgreSQL renders each row (`row_to_json`), so a column added later is exported without a change
/// here. Rows are read in pages, each page in a database use of its own and written before the next
/// is read: memory holds one page, however many messages the account has, and a slow reader holds
/// no database connection.
struct AccountExport: Sendable {
    let database: Database
    let logger: Logger

    static let method = HTTPRequest.Method.get
    static let path = "/api/v1/me/export"
    /// Below every id: the first page's keyset.
    private static let noID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    /// Rows per page (messages can be 8,000 characters: a page stays within a few MiB).
    static let pageSize = 500

    func register(on router: Router<AppRequestContext>) {
        router.on(RouterPath(Self.path), method: Self.method) { _, context in
            let principal = try Authorization.require("profile:read", in: context)
            // The account must exist before the first byte: afterwards an error can only cut the body.
            guard try await exists(principal.userID) else { throw APIError.invalidToken("The account of this token no longer exists.") }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store", .contentDisposition: #"attachment; filename="export.json""#],
                body: .init { writer in
                    try await write(userID: principal.userID, to: &writer)
                    try await writer.finish(nil)
                })
        }
    }

    private func exists(_ userID: UUID) async throws -> Bool {
        try await database.run { client in
            for try await _ in try await client.query("SELECT 1 FROM users WHERE id = \(userID)", logger: logger) { return true }
            return false
        }
    }

    /// The whole document, written to `writer` in pieces of about 64 KiB.
    func write(userID: UUID, to writer: inout some ResponseBodyWriter) async throws {
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
                SELECT product_id, platform, status, purchase_at, expires_at, will_renew, period_type, unsubscribed_at, billing_issue_at,
                       grace_until, refunded_at, resumes_at, sandbox, created_at, updated_at
                FROM iap_receipts WHERE user_id = \(userID) ORDER BY purchase_at
            ) r
            """)
        try await section("recalls", into: &out, writer: &writer, "SELECT row_to_json(r)::text FROM recalls r WHERE user_id = \(userID) ORDER BY created_at, id")
        out.append(#","chats":["#)
        try await chats(userID: userID, into: &out, writer: &writer)
        out.append("]}")
        try await out.flush(to: &writer)
    }

    /// The chats, each with its evaluation, tags and messages, a page of chats at a time.
    private func chats(userID: UUID, into out: inout Output, writer: inout some ResponseBodyWriter) async throws {
        var after: (Date, UUID)?
        var first = true
        while true {
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
                    ORDER BY c.created_at, c.id LIMIT \(Self.pageSize)
                    """, logger: logger
                ).decode((Date, UUID, String, String?, String).self) { rows.append(row) }
                return rows
            }
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
                try await messages(chatID: chatID, userID: userID, into: &out, writer: &writer)
                out.append("]}")
                try await out.flushIfFull(to: &writer)
            }
            guard page.count == Self.pageSize, let last = page.last else { return }
            after = (last.0, last.1)
        }
    }

    private func messages(chatID: UUID, userID: UUID, into out: inout Output, writer: inout some ResponseBodyWriter) async throws {
        var after: (Date, UUID)?
        var first = true
        while true {
            let (since, sinceID) = after ?? (.distantPast, Self.noID)
            let page: [(Date, UUID, String)] = try await database.run { client in
                var rows: [(Date, UUID, String)] = []
                for try await row in try await client.query(
                    """
                    SELECT m.created_at, m.id, row_to_json(m)::text FROM messages m
                    WHERE m.chat_id = \(chatID) AND m.user_id = \(userID) AND (m.created_at, m.id) > (\(since), \(sinceID))
                    ORDER BY m.created_at, m.id LIMIT \(Self.pageSize)
                    """, logger: logger
                ).decode((Date, UUID, String).self) { rows.append(row) }
                return rows
            }
            for (_, _, message) in page {
                out.append(first ? "" : ",")
                first = false
                out.append(message)
                try await out.flushIfFull(to: &writer)
            }
            guard page.count == Self.pageSize, let last = page.last else { return }
            after = (last.0, last.1)
        }
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
