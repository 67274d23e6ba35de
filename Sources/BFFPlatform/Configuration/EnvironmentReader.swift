import Foundation

/// Reads typed values out of the environment; every failure names the variable.
package struct EnvironmentReader {
    let env: [String: String]

    package init(_ env: [String: String]) { self.env = env }

    package func optional(_ name: String) -> String? {
        guard let value = env[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    package func required(_ name: String) throws -> String {
        guard let value = optional(name) else { throw ConfigurationError(name, "is required but not set") }
        return value
    }

    package func string(_ name: String, default fallback: String) -> String {
        optional(name) ?? fallback
    }

    package func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        guard let raw = optional(name) else { return fallback }
        guard let value = Int(raw), range.contains(value) else {
            throw ConfigurationError(name, "must be an integer in \(range.lowerBound)...\(range.upperBound), got \"\(raw)\"")
        }
        return value
    }

    package func bool(_ name: String, default fallback: Bool) throws -> Bool {
        guard let raw = optional(name) else { return fallback }
        switch raw.lowercased() {
        case "true": return true
        case "false": return false
        default: throw ConfigurationError(name, "must be true or false, got \"\(raw)\"")
        }
    }

    package func list(_ name: String, default fallback: [String]) -> [String] {
        guard let raw = optional(name) else { return fallback }
        return raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
