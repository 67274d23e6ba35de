import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
@testable import BFF

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
    extraRoutes: (Router<AppRequestContext>) -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    let configuration = try AppConfiguration(
        environment: TestEnvironment.serverEnvironment(database: database, overrides))
    let dependencies = try await AppDependencies(
        configuration: configuration, logger: makeLogger(level: configuration.logLevel, sink: logs.sink))
    return try buildApplication(dependencies, extraRoutes: extraRoutes)
}

extension TestResponse {
    var text: String { String(buffer: body) }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
    }

    var errorCode: String? { json["code"] as? String }
}
