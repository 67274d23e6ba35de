import BFFPlatform
import BFFWire
import Foundation
import NIOCore

/// One page of API-020: the newest-first list or, with `updated_since`, the delta pull.
struct ChatPage: Sendable {
    let records: [ChatRecord]
    let nextCursor: String?

    /// The contract's `ChatList` JSON, written directly (see `JSONWriter`): members in schema order,
    /// absent optionals omitted, as the generated encoder does.
    func json() -> ByteBuffer {
        var writer = JSONWriter(capacity: 512 + records.count * 400)
        writer.raw("{\"items\":[")
        for (index, record) in records.enumerated() {
            if index > 0 { writer.byte(UInt8(ascii: ",")) }
            record.writeListItem(to: &writer)
        }
        writer.byte(UInt8(ascii: "]"))
        if let nextCursor {
            writer.raw(",\"next_cursor\":")
            writer.string(nextCursor)
        }
        writer.byte(UInt8(ascii: "}"))
        return writer.buffer
    }
}

extension ChatRecord {
    /// A `Chat`, or a `ChatTombstone` for a deleted chat.
    func writeListItem(to writer: inout JSONWriter) {
        writer.raw("{\"id\":")
        writer.uuid(id.uuid)
        if deleted {
            writer.raw(",\"deleted\":true,\"updated_at\":")
            writer.timestamp(micros: updatedMicros)
            writer.byte(UInt8(ascii: "}"))
            return
        }
        writer.raw(",\"title\":")
        writer.string(title)
        if let subjectID {
            writer.raw(",\"subject_id\":")
            writer.string(subjectID)
        }
        if let topicID {
            writer.raw(",\"topic_id\":")
            writer.string(topicID)
        }
        writer.raw(status == "ended" ? ",\"status\":\"ended\",\"created_at\":" : ",\"status\":\"in_progress\",\"created_at\":")
        writer.timestamp(micros: createdMicros)
        writer.raw(",\"updated_at\":")
        writer.timestamp(micros: updatedMicros)
        writer.raw(",\"message_count\":")
        writer.integer(messageCount)
        if let lastMessagePreview {
            writer.raw(",\"last_message_preview\":")
            writer.string(lastMessagePreview)
        }
        writer.byte(UInt8(ascii: "}"))
    }
}

extension ChatStore {
    /// The page the query asks for; cursors of the other list, bad limits and bad dates are 422.
    func page(userID: UUID, limit requested: Int?, cursor: String?, updatedSince: Date?) async throws -> ChatPage {
        let limit = try PageLimit.resolve(requested, default: 20, max: 200)
        let list: KeysetCursor.List = updatedSince == nil ? .newest : .delta
        // Nearest, not down: a Date parsed from ".462Z" may lie a fraction of a microsecond below it,
        // and the change stamped .462 would then come back to the client that sent it.
        let sinceMicros = try updatedSince.map { try RFC3339Dates.micros($0, field: "updated_since") }
        let filter = sinceMicros.map(String.init) ?? ""
        let after = try cursor.map { try KeysetCursor.decode($0, expecting: list, filter: filter) }
        var records: [ChatRecord]
        if let sinceMicros {
            records = try await changes(userID: userID, sinceMicros: sinceMicros, limit: limit, after: after)
        } else {
            records = try await newest(userID: userID, limit: limit, after: after)
        }
        var nextCursor: String?
        if records.count > limit {
            records.removeLast(records.count - limit)
            nextCursor = KeysetCursor(list: list, micros: records[limit - 1].updatedMicros, id: records[limit - 1].id, filter: filter).encoded()
        }
        return ChatPage(records: records, nextCursor: nextCursor)
    }
}
