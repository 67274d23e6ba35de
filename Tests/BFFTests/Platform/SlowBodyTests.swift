import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import BFF
@testable import BFFPlatform

/// Nothing heavy before authentication: clients that announce large bodies and send them slowly,
/// without a token, cost the server neither buffers nor connections.
@Suite("Slow bodies", .needsDatabase, .timeLimit(.minutes(3)))
struct SlowBodyTests {
    static func residentBytes(of pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        let kilobytes = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        return kilobytes * 1024
    }

    @Test("2,000 connections each trickling a 60 KiB body without a token leave RSS within 64 MiB of idle, and /healthz answering")
    func slowBodiesWithoutToken() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let server = try BFFProcess(
            ["serve"], environment: TestEnvironment.serverEnvironment(database: database, ["BFF_JOBS_CONCURRENCY": "0"]),
            port: try await BFFProcess.freePort())
        defer { server.stop() }
        #expect(try await server.becomesReady())
        for _ in 0..<20 { _ = try await BFFProcess.send(.GET, "\(server.base)/healthz") }
        let idle = try Self.residentBytes(of: server.process.processIdentifier)

        let deadline = ContinuousClock.now + .seconds(60)
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        let head = "POST /api/v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 61440\r\n\r\n"
        let piece = ByteBuffer(string: "{\"title\":\"" + String(repeating: "a", count: 1014))
        var channels: [any Channel] = []
        for batch in stride(from: 0, to: 2_000, by: 100) where ContinuousClock.now < deadline {
            for _ in batch..<(batch + 100) {
                guard let channel = try? await bootstrap.connect(host: "127.0.0.1", port: server.port).get() else { continue }
                channel.writeAndFlush(ByteBuffer(string: head), promise: nil)
                channel.writeAndFlush(piece, promise: nil)
                channels.append(channel)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(channels.count >= 1_900, "connections opened: \(channels.count)")
        // Each goes on sending a kilobyte a second for a while; a server that read bodies before
        // authentication would hold 2,000 growing buffers by now.
        for _ in 0..<5 where ContinuousClock.now < deadline {
            for channel in channels where channel.isActive { channel.writeAndFlush(piece, promise: nil) }
            try await Task.sleep(for: .seconds(1))
        }
        let loaded = try Self.residentBytes(of: server.process.processIdentifier)
        let health = try await BFFProcess.send(.GET, "\(server.base)/healthz")
        let stillOpen = channels.filter(\.isActive).count
        for channel in channels { channel.close(promise: nil) }
        #expect(health.status == 200)
        #expect(loaded - idle < 64 * 1024 * 1024, "RSS grew \((loaded - idle) / 1_048_576) MiB (idle \(idle / 1_048_576) MiB)")
        // Every one was answered 401 and closed by the server, not left to drain.
        #expect(stillOpen == 0, "\(stillOpen) connections still open")
    }
}
