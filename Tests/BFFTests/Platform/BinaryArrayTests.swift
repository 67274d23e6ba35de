import BFFWire
import Foundation
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// `BinaryArray` reads `array_send`'s format itself, and the chat lists read whole pages through it;
/// postgres-nio's row-by-row decoding of the same values is the reference.
@Suite("Binary arrays", .needsDatabase, .timeLimit(.minutes(3)))
struct BinaryArrayTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// The cells of the single row `sql` returns.
    private func cells(_ sql: PostgresQuery) async throws -> [PostgresCell] {
        try await database.withClient { client in
            var cells: [PostgresCell] = []
            for try await row in try await client.query(sql) { cells = Array(row) }
            return cells
        }
    }

    @Test("every element type of the lists, NULL elements, and no rows at all")
    func readsElements() async throws {
        let cells = try await cells(
            """
            SELECT array_agg(id), array_agg(t), array_agg(o), array_agg(ts), array_agg(n), array_agg(b),
                   (SELECT array_agg(1) WHERE false), '{}'::uuid[]
            FROM (VALUES ('0b6c2d5e-8f1a-4c3b-9d7e-1f2a3b4c5d6e'::uuid, '日本語 🧪 "x"', NULL::text,
                          timestamptz '1969-07-20 20:17:40.000001+00', 7::int4, true),
                         ('ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, '', 'preview',
                          timestamptz '2026-11-22 09:15:00.123+00', -1::int4, false)) AS v(id, t, o, ts, n, b)
            """)
        #expect(cells.count == 8)
        var ids = try BinaryArray(cells[0], of: .uuid)
        #expect(ids.remaining == 2)
        #expect(try ids.uuid() == UUID(uuidString: "0b6c2d5e-8f1a-4c3b-9d7e-1f2a3b4c5d6e"))
        #expect(try ids.uuid() == UUID(uuidString: "ffffffff-ffff-ffff-ffff-ffffffffffff"))
        #expect(ids.remaining == 0)
        #expect(throws: BinaryArray.Malformed.self) { try ids.uuid() }

        var texts = try BinaryArray(cells[1], of: .text)
        #expect(try texts.string() == "日本語 🧪 \"x\"")
        #expect(try texts.string() == "")
        var optionals = try BinaryArray(cells[2], of: .text)
        #expect(try optionals.optionalString() == nil)
        #expect(try optionals.optionalString() == "preview")
        var missing = try BinaryArray(cells[2], of: .text)
        #expect(throws: BinaryArray.Malformed.self) { try missing.string() }

        var stamps = try BinaryArray(cells[3], of: .timestamptz)
        #expect(try stamps.timestampMicros() == -14_182_939_999_999)
        #expect(try stamps.timestampMicros() == 1_795_338_900_123_000)
        var numbers = try BinaryArray(cells[4], of: .int4)
        #expect(try numbers.int() == 7)
        #expect(try numbers.int() == -1)
        var flags = try BinaryArray(cells[5], of: .bool)
        #expect(try flags.bool() == true)
        #expect(try flags.bool() == false)

        #expect(try BinaryArray(cells[6], of: .int4).remaining == 0, "array_agg over no rows is NULL: no elements")
        #expect(try BinaryArray(cells[7], of: .uuid).remaining == 0, "'{}' has no dimensions")
    }

    @Test("another element type or more than one dimension is refused, not misread")
    func refusesOtherShapes() async throws {
        let cells = try await cells("SELECT ARRAY[1, 2]::int8[], ARRAY[[1, 2], [3, 4]]::int4[]")
        #expect(throws: BinaryArray.Malformed.self) { try BinaryArray(cells[0], of: .int4) }
        #expect(throws: BinaryArray.Malformed.self) { try BinaryArray(cells[1], of: .int4) }
    }

    @Test("a page of arrays reads as the same rows read one by one, put in keyset order whatever the aggregate's order")
    func pageMatchesRows() async throws {
        // Same updated_at for two chats: the id decides, compared bytewise as PostgreSQL does.
        let values = """
            (VALUES ('00000000-0000-4000-8000-000000000002'::uuid, 'b', 'math', NULL, 'ended', 10, 20, 3, 'hi', false),
                    ('80000000-0000-4000-8000-000000000001'::uuid, 'a', NULL, NULL, 'in_progress', 11, 20, 0, NULL, true),
                    ('00000000-0000-4000-8000-000000000003'::uuid, 'c', 'math', 'algebra', 'in_progress', 12, 30, 1, 'x', false),
                    ('00000000-0000-4000-8000-000000000004'::uuid, 'd', NULL, NULL, 'in_progress', 13, 5, 0, NULL, false))
            AS v(id, title, subject_id, topic_id, status, c, u, message_count, last_message_preview, deleted)
            """
        let columns = """
            id, title, subject_id, topic_id, status, timestamptz 'epoch' + c * interval '1 second' AS created_at,
            timestamptz 'epoch' + u * interval '1 second' AS updated_at, message_count, last_message_preview, deleted
            """
        for (list, order) in [(KeysetCursor.List.newest, "updated_at DESC, id DESC"), (.delta, "updated_at, id")] {
            let (fromPage, fromRows) = try await database.withClient { client in
                var fromPage: [ChatRecord] = []
                // Aggregated in the opposite order on purpose: the reader must restore the keyset order.
                let reversed = list == .newest ? "updated_at, id" : "updated_at DESC, id DESC"
                for try await row in try await client.query(
                    PostgresQuery(
                        unsafeSQL: """
                            SELECT \(ChatStore.pageColumns) FROM (SELECT \(columns) FROM \(values) ORDER BY \(reversed)) page
                            """))
                {
                    fromPage = try ChatRecord.page(row, list: list)
                }
                var fromRows: [ChatRecord] = []
                for try await row in try await client.query(PostgresQuery(unsafeSQL: "SELECT \(columns) FROM \(values) ORDER BY \(order)")) {
                    fromRows.append(try ChatRecord(row: row))
                }
                return (fromPage, fromRows)
            }
            #expect(fromRows.count == 4)
            #expect(fromPage == fromRows, "\(list)")
        }
    }
}
