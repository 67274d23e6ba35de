import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import EventLoopExecutor

/// The hook that moves Swift's global executor onto the event loops (`EventLoopExecutor`). It is
/// installed in `bff` only: installed here, every other suite's task would run on the loops too.
@Suite("Event-loop global executor", .needsDatabase, .timeLimit(.minutes(3)))
struct EventLoopExecutorTests {
    @Test("the hook goes into an empty slot with compare-and-exchange: the first installer wins, a second leaves the slot as it is")
    func installsOnce() {
        let slot = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
        defer { slot.deallocate() }
        slot.initialize(to: nil)
        #expect(EventLoopGlobalExecutor.install(into: slot))
        let installed = slot.pointee
        #expect(installed != nil)
        #expect(!EventLoopGlobalExecutor.install(into: slot))
        #expect(slot.pointee == installed)

        let foreign = UnsafeMutableRawPointer(bitPattern: 0x1000)
        slot.pointee = foreign
        #expect(!EventLoopGlobalExecutor.install(into: slot), "another library's hook was replaced")
        #expect(slot.pointee == foreign)
    }

    @Test("bff serve runs its tasks on the event loops: the start-up task, many awaits in, is on one")
    func serveRunsOnEventLoops() async throws {
        let binary = TestEnvironment.repository.appendingPathComponent(".build/debug/bff").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build bff first (scripts/test does)")
        let database = try await TestDatabases.shared.makeMigrated()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("bff-executor-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }

        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["serve"]
        server.environment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "info"])
            .merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        server.standardOutput = try FileHandle(forWritingTo: output)
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { server.terminate() } }

        // The "starting" line comes after the configuration, the database pool and the IdP's
        // discovery were awaited: the task that logs it has been resumed by many jobs.
        var starting: [String: Any]?
        for _ in 0..<400 where starting == nil && server.isRunning {
            let lines = (try? String(contentsOf: output, encoding: .utf8))?.split(separator: "\n") ?? []
            starting = lines.lazy.compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }.first { $0["msg"] as? String == "starting" }
            if starting == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let line = try #require(starting, "bff serve logged no start-up line")
        #expect(line["executor"] as? String == "event-loops", "\(line)")
    }
}
