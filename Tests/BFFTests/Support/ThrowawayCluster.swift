import Foundation
@testable import BFF

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
        port = (name == "fault" ? 55_000 : 59_000) + Int(pid % 4000)
    }

    /// The data directory (`postgresql.conf`, and the files it names).
    var dataDirectory: String { "\(directory)/data" }

    var url: DatabaseURL {
        get throws { try DatabaseURL(parsing: "postgres://bff@localhost:\(port)/postgres?host=\(directory)/run") }
    }

    /// Runs `pg-cluster COMMAND DIR PORT`; waits through the termination handler, never blocking
    /// one of the few cooperative threads.
    func run(_ command: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = [command, directory, String(port)]
        try FileManager.default.createDirectory(atPath: "\(directory)/..", withIntermediateDirectories: true)
        let log = URL(fileURLWithPath: "\(directory).\(command).err")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let errors = try FileHandle(forWritingTo: log)
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        try? errors.close()
        let message = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: log)
        guard status == 0 else { throw TestSetupError("pg-cluster \(command) failed: \(message)") }
    }
}
