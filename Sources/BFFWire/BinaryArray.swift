import Foundation
import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array in binary format (`array_send`), read element by element.
///
/// Used for pages sent as one row of `array_agg` columns: postgres-nio spends several microseconds
/// on every row it delivers, so twenty rows cost the server more than the query; ten arrays in one
/// row cost one row (docs/architecture.md#the-fast-path, the chat list).
public struct BinaryArray {
    public struct Malformed: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// Elements not read yet.
    public private(set) var remaining: Int
    private let elementType: PostgresDataType
    private var buffer: ByteBuffer

    /// The array in `cell`, whose elements must be of `elementType`. A NULL cell (what `array_agg`
    /// gives over no rows) is the empty array.
    public init(_ cell: PostgresCell, of elementType: PostgresDataType) throws {
        self.elementType = elementType
        guard var buffer = cell.bytes else {
            remaining = 0
            self.buffer = ByteBuffer()
            return
        }
        guard cell.format == .binary else {
            throw Malformed(description: "column \(cell.columnName) is not in binary format")
        }
        guard let dimensions = buffer.readInteger(as: Int32.self), buffer.readInteger(as: Int32.self) != nil,
            let oid = buffer.readInteger(as: UInt32.self)
        else { throw Malformed(description: "column \(cell.columnName): truncated array header") }
        switch dimensions {
        case 0:
            remaining = 0
        case 1:
            guard let count = buffer.readInteger(as: Int32.self), count >= 0, buffer.readInteger(as: Int32.self) != nil else {
                throw Malformed(description: "column \(cell.columnName): truncated array dimension")
            }
            remaining = Int(count)
        default:
            throw Malformed(description: "column \(cell.columnName) has \(dimensions) dimensions, not one")
        }
        guard remaining == 0 || oid == elementType.rawValue else {
            throw Malformed(description: "column \(cell.columnName) holds type \(oid), not \(elementType.rawValue)")
        }
        self.buffer = buffer
    }

    /// The next element's bytes, nil for NULL.
    public mutating func next() throws -> ByteBuffer? {
        guard remaining > 0 else { throw Malformed(description: "read past the last element") }
        remaining -= 1
        guard let length = buffer.readInteger(as: Int32.self) else { throw Malformed(description: "truncated element") }
        if length < 0 { return nil }
        guard let element = buffer.readSlice(length: Int(length)) else { throw Malformed(description: "truncated element") }
        return element
    }

    private mutating func required() throws -> ByteBuffer {
        guard let bytes = try next() else { throw Malformed(description: "NULL element of type \(elementType.rawValue)") }
        return bytes
    }

    private func invalid() -> Malformed {
        Malformed(description: "an element of type \(elementType.rawValue) has an unexpected length")
    }

    public mutating func uuid() throws -> UUID {
        guard let value = BinaryValue.uuid(try required()) else { throw invalid() }
        return value
    }

    public mutating func optionalString() throws -> String? {
        try next().map { String(buffer: $0) }
    }

    public mutating func string() throws -> String {
        String(buffer: try required())
    }

    public mutating func timestampMicros() throws -> Int64 {
        guard let value = BinaryValue.timestampMicros(try required()) else { throw invalid() }
        return value
    }

    public mutating func int() throws -> Int {
        guard let value = BinaryValue.int(try required(), type: elementType) else { throw invalid() }
        return value
    }

    public mutating func bool() throws -> Bool {
        guard let value = BinaryValue.bool(try required()) else { throw invalid() }
        return value
    }
}
