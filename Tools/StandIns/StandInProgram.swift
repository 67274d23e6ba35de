import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// What each stand-in program does around its service: lines on standard error under its name, a
/// quiet logger, the required `--port`, and serving until killed while saying which requests it
/// refused.
public struct StandInProgram: Sendable {
    public let name: String

    public init(_ name: String) {
        self.name = name
    }

    /// Writes "name: line" to standard error.
    public func say(_ line: String) {
        FileHandle.standardError.write(Data("\(name): \(line)\n".utf8))
    }

    /// The server's logger: warnings and worse only.
    public var logger: Logger {
        var logger = Logger(label: name)
        logger.logLevel = .warning
        return logger
    }

    /// `--port`, which every stand-in requires; without a number, prints `usage` and exits 2.
    public func port(_ options: StandInOptions, usage: String) -> Int {
        guard let port = Int(options.required("port", usage: usage)) else {
            say("--port must be a number")
            exit(2)
        }
        return port
    }

    /// Serves `router` on `port` until the process is killed: says `banner(base)` once, then each new
    /// entry of `violations` as "refused `what`: …" within a second. Exits 1 when it cannot serve.
    public func serve(
        _ router: Router<BasicRequestContext>, port: Int, banner: @escaping @Sendable (String) -> String,
        violations: NIOLockedValueBox<[String]>, what: String = "a request"
    ) async -> Never {
        do {
            try await serveHTTP1(router, port: port, logger: logger) { base in
                say(banner(base))
                var reported = 0
                while true {
                    try await Task.sleep(for: .seconds(1))
                    let seen = violations.withLockedValue { $0 }
                    for violation in seen.dropFirst(reported) { say("refused \(what): \(violation)") }
                    reported = seen.count
                }
            }
        } catch {
            say("\(error)")
        }
        exit(1)
    }
}
