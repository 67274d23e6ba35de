import BFFWire
import Foundation
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// `BinaryCells` reads PostgreSQL's binary values itself; postgres-nio's generic decoder is the
/// reference, on real rows from a real server, including the types it falls back for.
@Suite("Binary cells", .needsDatabase, .timeLimit(.minutes(3)))
struct BinaryCellsTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("uuid, text, timestamptz, int4/int8 and bool read as the generic decoder reads them; other types fall back")
    func matchesGenericDecoding() async throws {
        try await database.withClient { client in
            let rows = try await client.query(
                """
                SELECT gen_random_uuid(), t, CASE WHEN n % 3 = 0 THEN NULL ELSE t || '…' END,
                       ts, ts + interval '1 microsecond' * n, (n * 1000)::int4, (n * 1000000000000)::int8, n % 2 = 0,
                       'plain'::varchar, 'name'::name, n::int2
                FROM (VALUES (1, 'Photosynthesis', timestamptz '2026-11-22 09:15:00.123+00'),
                             (2, '日本語 🧪 "quoted" \\ ', timestamptz '1969-07-20 20:17:40.000001+00'),
                             (3, '', timestamptz '1999-12-31 23:59:59.999999+00'),
                             (4, 'x', timestamptz '2000-01-01 00:00:00+00')) AS v(n, t, ts)
                """)
            var count = 0
            for try await row in rows {
                count += 1
                var cells = BinaryCells(row)
                let (id, text, optional, ts, shifted, int4, int8, flag, varchar, name, int2) =
                    try row.decode((UUID, String, String?, Date, Date, Int, Int, Bool, String, String, Int).self)
                #expect(try cells.uuid() == id)
                #expect(try cells.string() == text)
                #expect(try cells.optionalString() == optional)
                #expect(try cells.timestampMicros() == Int64((ts.timeIntervalSince1970 * 1_000_000).rounded()))
                let micros = try cells.timestampMicros()
                #expect(abs(Double(micros) / 1_000_000 - shifted.timeIntervalSince1970) < 0.000_002)
                #expect(try cells.int() == int4)
                #expect(try cells.int() == int8)
                #expect(try cells.bool() == flag)
                #expect(try cells.string() == varchar)
                #expect(try cells.string() == name)
                #expect(try cells.int() == int2)
                #expect(throws: BinaryCells.MissingColumn.self) { try cells.bool() }
            }
            #expect(count == 4)
        }
    }
}
