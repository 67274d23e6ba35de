import Foundation

/// A stand-in program's `--name value` options, read from the command line; anything else prints
/// `usage` and exits 2.
public struct StandInOptions: Sendable {
    public let values: [String: String]

    public init(usage: String, arguments: [String] = CommandLine.arguments) {
        var values: [String: String] = [:]
        var rest = arguments.dropFirst()
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else { Self.exit(usage) }
            values[String(name.dropFirst(2))] = value
        }
        self.values = values
    }

    public subscript(_ name: String) -> String? { values[name] }

    /// An integer option, `fallback` when absent or not a number.
    public func int(_ name: String, default fallback: Int) -> Int { values[name].flatMap(Int.init) ?? fallback }

    /// A required option; without it, prints `usage` and exits 2.
    public func required(_ name: String, usage: String) -> String {
        guard let value = values[name] else { Self.exit(usage) }
        return value
    }

    private static func exit(_ usage: String) -> Never {
        FileHandle.standardError.write(Data("usage: \(usage)\n".utf8))
        Foundation.exit(2)
    }
}
