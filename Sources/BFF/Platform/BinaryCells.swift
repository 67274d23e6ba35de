import Foundation
import NIOCore
import PostgresNIO

/// Reads PostgreSQL's binary wire values of the common column types straight from a row's cells.
/// postgres-nio's generic `decode` resolves each column through protocol witnesses and dynamic
/// casts, which on a 20-row page cost more than the query; these readers do one type check and a
/// few byte reads per cell. A cell in another type or in text format takes the generic decoder,
/// so a schema change can make a read slower but never wrong.
struct BinaryCells {
    private var iterator: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        iterator = row.makeIterator()
    }

    private mutating func next() throws -> PostgresCell {
        guard let cell = iterator.next() else { throw MissingColumn() }
        return cell
    }

    struct MissingColumn: Error {}

    mutating func uuid() throws -> UUID {
        let cell = try next()
        guard cell.dataType == .uuid, cell.format == .binary, var bytes = cell.bytes, bytes.readableBytes == 16,
              let high = bytes.readInteger(as: UInt64.self), let low = bytes.readInteger(as: UInt64.self)
        else { return try cell.decode(UUID.self) }
        let h = high.bigEndian, l = low.bigEndian
        return withUnsafeBytes(of: (h, l)) { raw in
            UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                        raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }

    mutating func string() throws -> String {
        guard let text = try optionalString() else { throw PostgresDecodingError.Code.missingData }
        return text
    }

    mutating func optionalString() throws -> String? {
        let cell = try next()
        guard cell.dataType == .text || cell.dataType == .varchar, cell.format == .binary else {
            return try cell.decode(String?.self)
        }
        guard let bytes = cell.bytes else { return nil }
        return String(buffer: bytes)
    }

    /// A `timestamptz` as microseconds since 1970 (exact, unlike a `Date`).
    mutating func timestampMicros() throws -> Int64 {
        let cell = try next()
        guard cell.dataType == .timestamptz, cell.format == .binary, var bytes = cell.bytes, bytes.readableBytes == 8,
              let sincePostgresEpoch = bytes.readInteger(as: Int64.self)
        else {
            let date = try cell.decode(Date.self)
            return Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        }
        // PostgreSQL counts from 2000-01-01T00:00:00Z.
        return sincePostgresEpoch + 946_684_800_000_000
    }

    mutating func int() throws -> Int {
        let cell = try next()
        guard cell.format == .binary, var bytes = cell.bytes else { return try cell.decode(Int.self) }
        switch (cell.dataType, bytes.readableBytes) {
        case (.int4, 4): return Int(bytes.readInteger(as: Int32.self)!)
        case (.int8, 8): return Int(bytes.readInteger(as: Int64.self)!)
        default: return try cell.decode(Int.self)
        }
    }

    mutating func bool() throws -> Bool {
        let cell = try next()
        guard cell.dataType == .bool, cell.format == .binary, var bytes = cell.bytes, bytes.readableBytes == 1,
              let byte = bytes.readInteger(as: UInt8.self)
        else { return try cell.decode(Bool.self) }
        return byte != 0
    }
}

extension Date {
    init(micros: Int64) {
        self.init(timeIntervalSince1970: Double(micros) / 1_000_000)
    }
}
