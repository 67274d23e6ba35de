import BFFAPI
import Foundation
import Testing

@testable import BFF
@testable import BFFPlatform

/// `ChatListRoute` writes the list's JSON by hand; the generated types and `JSONEncoder` are the
/// reference it must agree with, member for member.
@Suite("Chat list JSON", .timeLimit(.minutes(3)))
struct ChatPageJSONTests {
    static func record(
        title: String, subject: String?, topic: String?, status: String, preview: String?, deleted: Bool,
        created: Int64, updated: Int64
    ) -> ChatRecord {
        ChatRecord(
            id: UUID(), title: title, subjectID: subject, topicID: topic, status: status, createdMicros: created,
            updatedMicros: updated, messageCount: deleted ? 0 : 42, lastMessagePreview: preview, deleted: deleted)
    }

    @Test("ChatPage.json() equals the generated ChatList encoded by JSONEncoder: nulls omitted, tombstones, escapes, dates")
    func matchesGenerated() throws {
        let records = [
            Self.record(
                title: "Photosynthesis", subject: "biology", topic: "biology.cells", status: "in_progress",
                preview: "So where does the oxygen come from?", deleted: false, created: 1_763_800_000_123_000, updated: 1_763_800_100_456_000),
            Self.record(
                title: "quote \" backslash \\ newline \n tab \t 日本語 🧪 </script>", subject: nil, topic: nil, status: "ended",
                preview: nil, deleted: false, created: 0, updated: 999_500),
            Self.record(
                title: "deleted", subject: nil, topic: nil, status: "in_progress", preview: nil, deleted: true,
                created: 946_684_800_000_000, updated: 951_782_400_001_000),
        ]
        for cursor in ["bjoxNzk1MDM0NjYwMjY2MDAwOjZk", nil] {
            let page = ChatPage(records: records, nextCursor: cursor)
            let generated = Components.Schemas.ChatList(
                items: records.map { $0.deleted ? .ChatTombstone($0.tombstone) : .Chat($0.schema) }, nextCursor: cursor)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(try RFC3339Dates().encode(date))
            }
            let reference = try JSONSerialization.jsonObject(with: encoder.encode(generated)) as? NSDictionary
            let ours = try JSONSerialization.jsonObject(with: Data(page.json().readableBytesView)) as? NSDictionary
            #expect(ours != nil && ours == reference)
        }
    }
}
