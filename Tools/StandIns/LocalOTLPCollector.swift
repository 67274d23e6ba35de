import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// An OpenTelemetry collector's OTLP/HTTP traces and metrics receivers (`POST /v1/traces`,
/// `POST /v1/metrics`), checking what they receive as a collector does: `Content-Type:
/// application/x-protobuf`, a body that decodes as an `ExportTraceServiceRequest` (spans with
/// 16-byte trace ids and 8-byte span ids that end after they start) or an
/// `ExportMetricsServiceRequest` (`OTLPMetrics.swift`). Anything else is answered 400 (415 for
/// another type) and noted as a violation. Decoded spans and metrics are kept for the tests to read.
public final class LocalOTLPCollector: Sendable {
    /// One span as it arrived, with its resource's attributes; ids in lowercase hex.
    public struct Span: Sendable {
        public let traceID: String
        public let spanID: String
        public let parentSpanID: String?
        public let name: String
        /// OTLP's `SpanKind`: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
        public let kind: Int
        /// Every attribute's value as text (strings as they are, numbers and booleans printed).
        public let attributes: [String: String]
        /// OTLP's `Status.code`: 0 unset, 1 ok, 2 error.
        public let statusCode: Int
        public let resource: [String: String]
        /// The spans this one links to (`Span.links`), as "traceid-spanid".
        public let links: [String]
    }

    public let spans = NIOLockedValueBox<[Span]>([])
    /// Every metric of every metrics export, in arrival order.
    public let metrics = NIOLockedValueBox<[Metric]>([])
    public let metricExports = NIOLockedValueBox(0)
    public let violations = NIOLockedValueBox<[String]>([])
    /// How the next exports are answered, first to last; once empty, each is accepted (a refused,
    /// garbled or dropped export keeps nothing; a stalled one keeps its spans once it answers).
    public let script = NIOLockedValueBox<[ScriptedAnswer]>([])
    /// Exports answered, scripted ones included.
    public let exports = NIOLockedValueBox(0)
    /// Spans accepted, kept or not.
    public let spanCount = NIOLockedValueBox(0)
    private let keepsSpans: Bool

    /// `keepSpans: false` only counts them (a benchmark's hundreds of thousands).
    public init(keepSpans: Bool = true) {
        self.keepsSpans = keepSpans
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/v1/metrics") { [self] request, _ -> Response in
            let received: [Metric]
            switch try await protobufBody(request) {
            case .failure(let refusal): return refusal.response
            case .success(let bytes):
                do { received = try Self.decodeMetrics(bytes) } catch { return refuse(400, "\(error)") }
            }
            metricExports.withLockedValue { $0 += 1 }
            metrics.withLockedValue { $0.append(contentsOf: received) }
            // An empty ExportMetricsServiceResponse: everything accepted.
            return Response(status: .ok, headers: [.contentType: "application/x-protobuf"], body: .init())
        }
        router.post("/v1/traces") { [self] request, _ -> Response in
            let received: [Span]
            switch try await protobufBody(request) {
            case .failure(let refusal): return refusal.response
            case .success(let bytes):
                do { received = try Self.decodeRequest(bytes) } catch { return refuse(400, "\(error)") }
            }
            exports.withLockedValue { $0 += 1 }
            let answer = script.withLockedValue { $0.isEmpty ? ScriptedAnswer.accept : $0.removeFirst() }
            return try await scripted(answer) {
                self.spanCount.withLockedValue { $0 += received.count }
                if self.keepsSpans { self.spans.withLockedValue { $0.append(contentsOf: received) } }
                // An empty ExportTraceServiceResponse: everything accepted.
                return Response(status: .ok, headers: [.contentType: "application/x-protobuf"], body: .init())
            }
        }
        return router
    }

    struct Refusal: Error {
        let response: Response
    }

    /// The body of an export as a collector accepts it: protobuf, not compressed.
    private func protobufBody(_ request: Request) async throws -> Result<[UInt8], Refusal> {
        guard request.headers[.contentType] == "application/x-protobuf" else {
            return .failure(Refusal(response: refuse(415, "content type \(request.headers[.contentType] ?? "none")")))
        }
        if let encoding = request.headers[.contentEncoding], encoding != "identity" {
            return .failure(Refusal(response: refuse(400, "content encoding \(encoding)")))
        }
        return .success(Array(try await request.body.collect(upTo: 16 << 20).readableBytesView))
    }

    private func refuse(_ status: Int, _ why: String) -> Response {
        violations.withLockedValue { $0.append(why) }
        return Response(status: .init(code: status), headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: why)))
    }

    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    static func decodeRequest(_ bytes: [UInt8]) throws -> [Span] {
        try exportedItems(bytes).map { try span($0.item, resource: $0.resource) }
    }

    /// The items of an OTLP export request with their resource's attributes. Traces and metrics
    /// nest alike, with the same field numbers: the request's `Resource{Spans,Metrics}` (1), each
    /// with its `resource` (1) and `Scope{Spans,Metrics}` (2), each with its spans or metrics (2).
    static func exportedItems(_ bytes: [UInt8]) throws -> [(resource: [String: String], item: ArraySlice<UInt8>)] {
        var items: [(resource: [String: String], item: ArraySlice<UInt8>)] = []
        var request = ProtobufReader(bytes[...])
        while let (field, wire) = try request.next() {
            guard field == 1, wire == 2 else {
                try request.skip(wire)
                continue
            }
            var resourceItems = ProtobufReader(try request.lengthDelimited())
            var resource: [String: String] = [:]
            var scopes: [ArraySlice<UInt8>] = []
            while let (field, wire) = try resourceItems.next() {
                switch (field, wire) {
                case (1, 2): resource = try attributes(of: try resourceItems.lengthDelimited())
                case (2, 2): scopes.append(try resourceItems.lengthDelimited())
                default: try resourceItems.skip(wire)
                }
            }
            for scope in scopes {
                var reader = ProtobufReader(scope)
                while let (field, wire) = try reader.next() {
                    if field == 2, wire == 2 {
                        items.append((resource, try reader.lengthDelimited()))
                    } else {
                        try reader.skip(wire)
                    }
                }
            }
        }
        return items
    }

    private static func span(_ bytes: ArraySlice<UInt8>, resource: [String: String]) throws -> Span {
        var reader = ProtobufReader(bytes)
        var traceID: ArraySlice<UInt8> = []
        var spanID: ArraySlice<UInt8> = []
        var parent: ArraySlice<UInt8> = []
        var name = ""
        var kind = 0
        var start: UInt64 = 0
        var end: UInt64 = 0
        var attributes: [String: String] = [:]
        var statusCode = 0
        var links: [String] = []
        while let (field, wire) = try reader.next() {
            switch (field, wire) {
            case (13, 2):
                var link = ProtobufReader(try reader.lengthDelimited())
                var linkTrace: ArraySlice<UInt8> = [], linkSpan: ArraySlice<UInt8> = []
                while let (field, wire) = try link.next() {
                    switch (field, wire) {
                    case (1, 2): linkTrace = try link.lengthDelimited()
                    case (2, 2): linkSpan = try link.lengthDelimited()
                    default: try link.skip(wire)
                    }
                }
                guard linkTrace.count == 16, linkSpan.count == 8 else { throw Malformed(description: "span \(name): a link without its ids") }
                links.append("\(hex(linkTrace))-\(hex(linkSpan))")
            case (1, 2): traceID = try reader.lengthDelimited()
            case (2, 2): spanID = try reader.lengthDelimited()
            case (4, 2): parent = try reader.lengthDelimited()
            case (5, 2): name = String(decoding: try reader.lengthDelimited(), as: UTF8.self)
            case (6, 0): kind = Int(try reader.varint())
            case (7, 1): start = try reader.fixed64()
            case (8, 1): end = try reader.fixed64()
            case (9, 2):
                let (key, value) = try keyValue(try reader.lengthDelimited())
                attributes[key] = value
            case (15, 2):
                var status = ProtobufReader(try reader.lengthDelimited())
                while let (field, wire) = try status.next() {
                    if field == 3, wire == 0 { statusCode = Int(try status.varint()) } else { try status.skip(wire) }
                }
            default: try reader.skip(wire)
            }
        }
        guard traceID.count == 16, traceID.contains(where: { $0 != 0 }) else { throw Malformed(description: "span \(name): trace id of \(traceID.count) bytes") }
        guard spanID.count == 8, spanID.contains(where: { $0 != 0 }) else { throw Malformed(description: "span \(name): span id of \(spanID.count) bytes") }
        guard parent.isEmpty || parent.count == 8 else { throw Malformed(description: "span \(name): parent span id of \(parent.count) bytes") }
        guard !name.isEmpty else { throw Malformed(description: "a span without a name") }
        guard start > 0, end >= start else { throw Malformed(description: "span \(name) ends before it starts") }
        return Span(
            traceID: hex(traceID), spanID: hex(spanID), parentSpanID: parent.isEmpty ? nil : hex(parent), name: name, kind: kind,
            attributes: attributes, statusCode: statusCode, resource: resource, links: links)
    }

    /// A `Resource`'s attributes (field 1, repeated `KeyValue`).
    static func attributes(of resource: ArraySlice<UInt8>) throws -> [String: String] {
        var reader = ProtobufReader(resource)
        var attributes: [String: String] = [:]
        while let (field, wire) = try reader.next() {
            if field == 1, wire == 2 {
                let (key, value) = try keyValue(try reader.lengthDelimited())
                attributes[key] = value
            } else {
                try reader.skip(wire)
            }
        }
        return attributes
    }

    /// A `KeyValue` whose `AnyValue` is a string, boolean, integer or double, as text.
    static func keyValue(_ bytes: ArraySlice<UInt8>) throws -> (String, String) {
        var reader = ProtobufReader(bytes)
        var key = ""
        var value = ""
        while let (field, wire) = try reader.next() {
            switch (field, wire) {
            case (1, 2): key = String(decoding: try reader.lengthDelimited(), as: UTF8.self)
            case (2, 2):
                var any = ProtobufReader(try reader.lengthDelimited())
                while let (field, wire) = try any.next() {
                    switch (field, wire) {
                    case (1, 2): value = String(decoding: try any.lengthDelimited(), as: UTF8.self)
                    case (2, 0): value = try any.varint() == 0 ? "false" : "true"
                    case (3, 0): value = String(Int64(bitPattern: try any.varint()))
                    case (4, 1): value = String(Double(bitPattern: try any.fixed64()))
                    default: try any.skip(wire)
                    }
                }
            default: try reader.skip(wire)
            }
        }
        guard !key.isEmpty else { throw Malformed(description: "an attribute without a key") }
        return (key, value)
    }

    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
        }.joined()
    }
}

/// Protocol Buffers' wire format, as far as reading OTLP needs: field tags, varints, fixed 64-bit
/// values and length-delimited fields; 32-bit fields are skipped.
struct ProtobufReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
    }

    /// Whether a packed field has values left.
    var hasMore: Bool { !bytes.isEmpty }

    /// The next field's number and wire type, or nil at the end.
    mutating func next() throws -> (Int, Int)? {
        guard !bytes.isEmpty else { return nil }
        let tag = try varint()
        guard tag >> 3 > 0 else { throw LocalOTLPCollector.Malformed(description: "field number 0") }
        return (Int(tag >> 3), Int(tag & 7))
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            guard let byte = bytes.popFirst() else { throw LocalOTLPCollector.Malformed(description: "a varint runs past the end") }
            value |= UInt64(byte & 0x7f) << UInt64(shift)
            if byte & 0x80 == 0 { return value }
        }
        throw LocalOTLPCollector.Malformed(description: "a varint over 10 bytes")
    }

    mutating func fixed64() throws -> UInt64 {
        guard bytes.count >= 8 else { throw LocalOTLPCollector.Malformed(description: "a fixed64 runs past the end") }
        var value: UInt64 = 0
        for (index, byte) in bytes.prefix(8).enumerated() { value |= UInt64(byte) << UInt64(8 * index) }
        bytes = bytes.dropFirst(8)
        return value
    }

    mutating func lengthDelimited() throws -> ArraySlice<UInt8> {
        let length = try varint()
        guard length <= UInt64(bytes.count) else { throw LocalOTLPCollector.Malformed(description: "a field of \(length) bytes runs past the end") }
        let field = bytes.prefix(Int(length))
        bytes = bytes.dropFirst(Int(length))
        return field
    }

    mutating func skip(_ wire: Int) throws {
        switch wire {
        case 0: _ = try varint()
        case 1: _ = try fixed64()
        case 2: _ = try lengthDelimited()
        case 5:
            guard bytes.count >= 4 else { throw LocalOTLPCollector.Malformed(description: "a fixed32 runs past the end") }
            bytes = bytes.dropFirst(4)
        default: throw LocalOTLPCollector.Malformed(description: "wire type \(wire)")
        }
    }
}
