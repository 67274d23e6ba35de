import Foundation
import Logging
import NIOConcurrencyHelpers

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
        var object: [String: Any] = [
            "ts": Self.timestamp(),
            "level": event.level.rawValue,
            "label": label,
            "msg": event.message.description,
        ]
        for (key, value) in merged where object[key] == nil {
            object[key] = Self.json(value)
        }
        // A request path or a rejected token's reason is the client's text, as long as it likes:
        // one request must not write megabytes of log.
        for (key, value) in object {
            if let text = value as? String, text.utf8.count > Self.valueLimit { object[key] = Self.truncated(text) }
        }
        guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return
        }
        line.append(0x0A)
        sink.write(line)
    }

    /// Bytes of one string value kept in a line.
    static let valueLimit = 4096

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

    private static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let string): string
        case .stringConvertible(let convertible): convertible.description
        case .array(let array): array.map(json)
        case .dictionary(let dictionary): dictionary.mapValues(json)
        }
    }

    private static func timestamp() -> String {
        Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
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
