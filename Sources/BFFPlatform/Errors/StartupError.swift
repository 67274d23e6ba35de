/// Start-up could not begin serving; the process ends with this one line.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String

    package init(_ description: String) { self.description = description }
}
