import Foundation
import NIOConcurrencyHelpers

@testable import BFF
@testable import BFFPlatform

/// A PostgreSQL cluster of the test's own, managed through `scripts/lib/pg-cluster`, for tests that
/// stop and start the server under a running BFF.
struct ThrowawayCluster {
    let directory: String
    let port: Int
    private let script: String

    /// `name` keeps clusters of suites that run at the same time apart (folder and port).
    init(name: String = "fault") throws {
        guard let script = TestEnvironment.values["BFF_TEST_PG_CLUSTER"],
            let local = TestEnvironment.values["BFF_TEST_LOCAL_DIR"]
        else { throw TestSetupError("BFF_TEST_PG_CLUSTER and BFF_TEST_LOCAL_DIR are not set: run the suite through scripts/test") }
        self.script = script
        let pid = ProcessInfo.processInfo.processIdentifier
        directory = "\(local)/tmp/\(name)-\(pid)"
        // The port only names the Unix socket (the cluster listens on no TCP port).
        let bases = ["fault": 55_000, "tls": 59_000, "jobs": 61_000]
        guard let base = bases[name] else { throw TestSetupError("no socket port range for a cluster named \(name)") }
        port = base + Int(pid % 4000)
    }

    /// The data directory (`postgresql.conf`, and the files it names).
    var dataDirectory: String { "\(directory)/data" }

    var url: DatabaseURL {
        get throws { try DatabaseURL(parsing: "postgres://bff@localhost:\(port)/postgres?host=\(directory)/run") }
    }

    /// Runs `pg-cluster COMMAND DIR PORT`.
    func run(_ command: String) async throws {
        try FileManager.default.createDirectory(atPath: "\(directory)/..", withIntermediateDirectories: true)
        let log = URL(fileURLWithPath: "\(directory).\(command).err")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let errors = try FileHandle(forWritingTo: log)
        let status = try await Self.runProcess(script, [command, directory, String(port)], errors: errors)
        try? errors.close()
        let message = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: log)
        guard status == 0 else { throw TestSetupError("pg-cluster \(command) failed: \(message)") }
    }

    /// Runs a program and returns its exit status; waits through the termination handler, never
    /// blocking one of the few cooperative threads. A program not seen to end within `limit` is
    /// terminated and the call throws, so that a lost exit fails the test instead of hanging the run.
    static func runProcess(
        _ executable: String, _ arguments: [String], errors: FileHandle? = nil, limit: Duration = .seconds(120)
    ) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = errors ?? FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let settled = NIOLockedValueBox(false)
        return try await withCheckedThrowingContinuation { continuation in
            @Sendable func settle(_ result: Result<Int32, any Error>) {
                guard
                    settled.withLockedValue({ done in
                        defer { done = true }; return !done
                    })
                else { return }
                continuation.resume(with: result)
            }
            process.terminationHandler = { settle(.success($0.terminationStatus)) }
            do {
                try process.run()
            } catch {
                settle(.failure(error))
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + limit.seconds) {
                if process.isRunning { process.terminate() }
                settle(.failure(TestSetupError("\(executable) \(arguments.joined(separator: " ")) not seen to end within \(limit)")))
            }
        }
    }
}
