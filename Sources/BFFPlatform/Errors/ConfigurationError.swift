/// A start-up failure that names the offending variable, so an operator sees one clear line.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    public let variable: String
    public let problem: String

    public init(_ variable: String, _ problem: String) {
        self.variable = variable
        self.problem = problem
    }

    public var description: String { "configuration error: \(variable) \(problem)" }
}
