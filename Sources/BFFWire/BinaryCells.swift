import Foundation
import NIOCore
import PostgresNIO

/// Reads PostgreSQL's binary wire values of the common column types straight from a row's cells.
/// postgres-nio's generic `decode` resolves each column through protocol witnesses and dynamic
/// casts, which on a 20-row page cost more than the query; these readers do one type check and a
/// few byte reads per cell. A cell in another type or in text format takes the generic decoder,
/// so a schema change can make a read slower but never wrong.
public struct BinaryCells {
    private var iterator: PostgresRow.Iterator

    public init(_ row: PostgresRow) {
        iterator = row.makeIterator()
    }

    private mutating func next() throws -> PostgresCell {
        guard let cell = iterator.next() else { throw MissingColumn() }
        return cell
    }

    public struct MissingColumn: Error {
        public init() {}
    }

    public mutating func uuid() throws -> UUID {
        let cell = try next()
        guard cell.dataType == .uuid, cell.format == .binary, let bytes = cell.bytes, let value = BinaryValue.uuid(bytes)
        else { return try cell.decode(UUID.self) }
        return value
    }

    public mutating func string() throws -> String {
        guard let text = try optionalString() else { throw PostgresDecodingError.Code.missingData }
        return text
    }

    public mutating func optionalString() throws -> String? {
        let cell = try next()
        guard cell.dataType == .text || cell.dataType == .varchar, cell.format == .binary else {
            return try cell.decode(String?.self)
        }
        guard let bytes = cell.bytes else { return nil }
        return String(buffer: bytes)
    }

    /// A `timestamptz` as microseconds since 1970 (exact, unlike a `Date`).
    public mutating func timestampMicros() throws -> Int64 {
        let cell = try next()
        guard cell.dataType == .timestamptz, cell.format == .binary, let bytes = cell.bytes,
            let micros = BinaryValue.timestampMicros(bytes)
        else {
            let date = try cell.decode(Date.self)
            return Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        }
        return micros
    }

    public mutating func int() throws -> Int {
        let cell = try next()
        guard cell.format == .binary, let bytes = cell.bytes, let value = BinaryValue.int(bytes, type: cell.dataType)
        else { return try cell.decode(Int.self) }
        return value
    }

    public mutating func bool() throws -> Bool {
        let cell = try next()
        guard cell.dataType == .bool, cell.format == .binary, let bytes = cell.bytes, let value = BinaryValue.bool(bytes)
        else { return try cell.decode(Bool.self) }
        return value
    }
}

/// PostgreSQL's binary encodings (the types' `send` functions) of single values; nil when the bytes
/// do not have the type's length. Shared by row cells and array elements.
public enum BinaryValue {
    public static func uuid(_ bytes: ByteBuffer) -> UUID? {
        guard bytes.readableBytes == 16 else { return nil }
        return UUID(uuid: bytes.withUnsafeReadableBytes { $0.loadUnaligned(as: uuid_t.self) })
    }

    /// Microseconds since 1970 of a `timestamptz`, which PostgreSQL counts from 2000-01-01T00:00:00Z.
    public static func timestampMicros(_ bytes: ByteBuffer) -> Int64? {
        guard bytes.readableBytes == 8, let sincePostgresEpoch = bytes.getInteger(at: bytes.readerIndex, as: Int64.self)
        else { return nil }
        return sincePostgresEpoch + 946_684_800_000_000
    }

    /// An `int4` or `int8`.
    public static func int(_ bytes: ByteBuffer, type: PostgresDataType) -> Int? {
        switch (type, bytes.readableBytes) {
        case (.int4, 4): return bytes.getInteger(at: bytes.readerIndex, as: Int32.self).map(Int.init)
        case (.int8, 8): return bytes.getInteger(at: bytes.readerIndex, as: Int64.self).map(Int.init)
        default: return nil
        }
    }

    public static func bool(_ bytes: ByteBuffer) -> Bool? {
        guard bytes.readableBytes == 1 else { return nil }
        return bytes.getInteger(at: bytes.readerIndex, as: UInt8.self).map { $0 != 0 }
    }
}

extension Date {
    public init(micros: Int64) {
        self.init(timeIntervalSince1970: Double(micros) / 1_000_000)
    }
}
