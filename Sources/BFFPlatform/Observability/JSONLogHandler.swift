import BFFWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// swift-log handler writing one JSON object per line to stdout:
/// `{"ts":…,"level":…,"label":…,"msg":…, <metadata>…}`.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: JSONLogSink

    public init(label: String, level: Logger.Level, sink: JSONLogSink = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let fixed: [(String, Logger.Metadata.Value)] = [
            ("level", .string(event.level.rawValue)), ("label", .string(label)), ("msg", .string(event.message.description)),
        ]
        var fields = fixed
        for (key, value) in merged where key != "ts" && !fixed.contains(where: { $0.0 == key }) { fields.append((key, value)) }
        fields.sort { $0.0 < $1.0 }

        // Written with the project's JSON writer: at info every request logs a line, and through
        // JSONSerialization and Date.formatted that line halved the chat list's throughput
        // (scripts/bench list at BENCH_LOG_LEVEL=info: ratio 0.27 against 0.58 at warning).
        var writer = JSONWriter(capacity: 512)
        writer.byte(UInt8(ascii: "{"))
        var first = true
        var timestampWritten = false
        for (key, value) in fields {
            if !timestampWritten, key > "ts" {
                Self.member("ts", first: &first, into: &writer)
                writer.timestamp(micros: Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()))
                timestampWritten = true
            }
            Self.member(key, first: &first, into: &writer)
            // A request path or a rejected token's reason is the client's text, as long as it likes:
            // one request must not write megabytes of log.
            Self.value(value, truncating: true, into: &writer)
        }
        if !timestampWritten {
            Self.member("ts", first: &first, into: &writer)
            writer.timestamp(micros: Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()))
        }
        writer.raw("}\n")
        sink.write(Data(writer.buffer.readableBytesView))
    }

    /// Bytes of one string value kept in a line.
    static let valueLimit = 4096

    private static func member(_ key: String, first: inout Bool, into writer: inout JSONWriter) {
        if !first { writer.byte(UInt8(ascii: ",")) }
        first = false
        writer.string(key)
        writer.byte(UInt8(ascii: ":"))
    }

    private static func value(_ value: Logger.Metadata.Value, truncating: Bool, into writer: inout JSONWriter) {
        switch value {
        case .string(let text):
            writer.string(truncating && text.utf8.count > valueLimit ? truncated(text) : text)
        case .stringConvertible(let convertible):
            let text = convertible.description
            writer.string(truncating && text.utf8.count > valueLimit ? truncated(text) : text)
        case .array(let array):
            writer.byte(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { writer.byte(UInt8(ascii: ",")) }
                Self.value(element, truncating: false, into: &writer)
            }
            writer.byte(UInt8(ascii: "]"))
        case .dictionary(let dictionary):
            writer.byte(UInt8(ascii: "{"))
            var first = true
            for (key, element) in dictionary.sorted(by: { $0.key < $1.key }) {
                member(key, first: &first, into: &writer)
                Self.value(element, truncating: false, into: &writer)
            }
            writer.byte(UInt8(ascii: "}"))
        }
    }

    private static func truncated(_ text: String) -> String {
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > valueLimit { break }
            kept.append(scalar)
        }
        return String(kept) + "…(truncated)"
    }
}

/// Where JSON lines go; tests capture them to check that no secret is ever logged.
public final class JSONLogSink: Sendable {
    private let write: @Sendable (Data) -> Void

    public init(_ write: @escaping @Sendable (Data) -> Void) {
        self.write = write
    }

    func write(_ line: Data) { write(line) }

    /// For CLI commands whose standard output is their result (a token, a count).
    public static let standardError = descriptor(FileHandle.standardError)

    public static let standardOutput = descriptor(FileHandle.standardOutput)

    /// `FileHandle.write(_:)` traps when the write fails (a closed pipe, a full disk): a log line
    /// that cannot be written is dropped instead. SIGPIPE is ignored by `bff` at start.
    private static func descriptor(_ handle: FileHandle) -> JSONLogSink {
        let lock = NIOLock()
        return JSONLogSink { data in
            lock.withLock { try? handle.write(contentsOf: data) }
        }
    }
}
