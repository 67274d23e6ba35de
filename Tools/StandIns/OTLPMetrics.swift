/// OTLP's metrics as a collector reads them: `ExportMetricsServiceRequest` → `ResourceMetrics` →
/// `ScopeMetrics` → `Metric`, each with a name and exactly one kind of data. A histogram's points
/// must have ascending bounds and one bucket more than bounds, whose counts add up to the point's
/// count, as the OTLP specification requires.
extension LocalOTLPCollector {
    public struct Metric: Sendable {
        public enum Kind: String, Sendable { case gauge, sum, histogram, exponentialHistogram, summary }

        public let name: String
        public let kind: Kind
        public let resource: [String: String]
        /// A histogram's bucket bounds (its first point's), empty for other kinds.
        public let bounds: [Double]
    }

    static func decodeMetrics(_ bytes: [UInt8]) throws -> [Metric] {
        try exportedItems(bytes).map { try metric($0.item, resource: $0.resource) }
    }

    private static func metric(_ bytes: ArraySlice<UInt8>, resource: [String: String]) throws -> Metric {
        var reader = ProtobufReader(bytes)
        var name = ""
        var kinds: [Metric.Kind] = []
        var bounds: [Double] = []
        while let (field, wire) = try reader.next() {
            switch (field, wire) {
            case (1, 2): name = String(decoding: try reader.lengthDelimited(), as: UTF8.self)
            case (5, 2): kinds.append(.gauge); _ = try reader.lengthDelimited()
            case (7, 2): kinds.append(.sum); _ = try reader.lengthDelimited()
            case (9, 2):
                kinds.append(.histogram)
                bounds = try histogramBounds(try reader.lengthDelimited(), metric: name)
            case (10, 2): kinds.append(.exponentialHistogram); _ = try reader.lengthDelimited()
            case (11, 2): kinds.append(.summary); _ = try reader.lengthDelimited()
            default: try reader.skip(wire)
            }
        }
        guard !name.isEmpty else { throw Malformed(description: "a metric without a name") }
        guard kinds.count == 1, let kind = kinds.first else { throw Malformed(description: "metric \(name) has \(kinds.count) kinds of data") }
        return Metric(name: name, kind: kind, resource: resource, bounds: bounds)
    }

    /// Checks every `HistogramDataPoint` of a `Histogram` (field 1) and returns the first one's bounds.
    private static func histogramBounds(_ bytes: ArraySlice<UInt8>, metric: String) throws -> [Double] {
        var reader = ProtobufReader(bytes)
        var first: [Double]?
        while let (field, wire) = try reader.next() {
            guard field == 1, wire == 2 else {
                try reader.skip(wire)
                continue
            }
            var point = ProtobufReader(try reader.lengthDelimited())
            var count: UInt64 = 0
            var buckets: [UInt64] = []
            var bounds: [Double] = []
            while let (field, wire) = try point.next() {
                switch (field, wire) {
                case (4, 1): count = try point.fixed64()
                case (6, 2):
                    var packed = ProtobufReader(try point.lengthDelimited())
                    while packed.hasMore { buckets.append(try packed.fixed64()) }
                case (7, 2):
                    var packed = ProtobufReader(try point.lengthDelimited())
                    while packed.hasMore { bounds.append(Double(bitPattern: try packed.fixed64())) }
                default: try point.skip(wire)
                }
            }
            guard zip(bounds, bounds.dropFirst()).allSatisfy({ $0 < $1 }) else { throw Malformed(description: "\(metric): bounds not ascending") }
            guard buckets.count == bounds.count + 1 else {
                throw Malformed(description: "\(metric): \(buckets.count) buckets for \(bounds.count) bounds")
            }
            guard buckets.reduce(0, +) == count else { throw Malformed(description: "\(metric): buckets add up to \(buckets.reduce(0, +)), count \(count)") }
            if first == nil { first = bounds }
        }
        return first ?? []
    }
}
