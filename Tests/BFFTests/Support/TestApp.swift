import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import BFF
@testable import BFFPlatform

/// Log lines the server under test wrote, to assert on request ids and on what must never be logged.
final class LogCapture: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])

    var sink: JSONLogSink {
        JSONLogSink { [lines] data in
            lines.withLockedValue { $0.append(String(decoding: data, as: UTF8.self)) }
        }
    }

    var all: [String] { lines.withLockedValue { $0 } }

    func entries() -> [[String: Any]] {
        all.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }
}

/// Builds the real application against `database` with the suite's environment.
func makeTestApp(
    database: DatabaseURL,
    environment overrides: [String: String] = [:],
    logs: LogCapture = LogCapture(),
    extraRoutes: [(operation: BFF.Operation, register: (Router<AppRequestContext>) -> Void)] = []
) async throws -> some ApplicationProtocol {
    let configuration = try AppConfiguration(
        environment: TestEnvironment.serverEnvironment(database: database, overrides))
    let dependencies = try await AppDependencies(
        configuration: configuration, logger: makeLogger(level: configuration.logLevel, sink: logs.sink))
    return try buildApplication(dependencies, extraRoutes: extraRoutes)
}

/// What the admin listener's `/metrics` shows: the process's registry, which the suites share.
func scrapeMetrics() -> String {
    var buffer: [UInt8] = []
    Observability.registry.emit(into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
}

extension LogCapture {
    /// The port the admin listener logged it listens on (`BFF_ADMIN_PORT=0`).
    func adminPort() async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let port = entries().lazy.compactMap { entry -> Int? in
                guard entry["msg"] as? String == "admin listener started", let address = entry["address"] as? String else { return nil }
                return address.split(separator: ":").last.flatMap { Int($0) }
            }.first
            if let port { return port }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestSetupError("the admin listener logged no port")
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    /// The body as a JSON object. Any other body is recorded as an issue (and read as `[:]`), so that
    /// `errorCode == nil` or a missing field cannot pass on a body that is no JSON at all.
    var json: [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] else {
            Issue.record("the body is not a JSON object (status \(status.code)): \(String(buffer: body).prefix(200))")
            return [:]
        }
        return object
    }

    /// The error body's `code`; nil for a body without one (a success's), an issue for no JSON object.
    var errorCode: String? { json["code"] as? String }
}
