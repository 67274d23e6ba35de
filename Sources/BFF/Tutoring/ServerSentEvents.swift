import BFFPlatform
import NIOCore

/// Reads a `text/event-stream` body as it arrives (the WHATWG event stream format): lines end in
/// LF, CRLF or CR, `data:` lines accumulate, a blank line ends an event, `:` lines are comments.
/// Only the data matters to a chat completion stream; event names and ids are skipped.
struct ServerSentEvents {
    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var lastWasCR = false
    /// An event's data beyond this is refused: a stream that never ends an event is not a reply.
    static let maximumEventBytes = 1 << 20

    struct TooLarge: Error {}

    /// Feeds `buffer`; returns the data of every event it completed.
    mutating func feed(_ buffer: ByteBuffer) throws -> [String] {
        var events: [String] = []
        for byte in buffer.readableBytesView {
            if lastWasCR, byte == 0x0A {
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 0x0D
            if byte == 0x0A || byte == 0x0D {
                if let event = endLine() { events.append(event) }
            } else {
                line.append(byte)
                if line.count + data.count > Self.maximumEventBytes { throw TooLarge() }
            }
        }
        return events
    }

    private mutating func endLine() -> String? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            guard hasData else { return nil }
            defer {
                data.removeAll(keepingCapacity: true)
                hasData = false
            }
            return String(decoding: data, as: UTF8.self)
        }
        guard line.starts(with: "data".utf8) else { return nil }
        var value = line.dropFirst(4)
        if let first = value.first {
            guard first == UInt8(ascii: ":") else { return nil }  // "database: …" is another field
            value = value.dropFirst()
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        }
        if hasData { data.append(0x0A) }
        data.append(contentsOf: value)
        hasData = true
        return nil
    }
}
