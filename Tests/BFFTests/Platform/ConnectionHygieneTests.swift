import AsyncHTTPClient
import Foundation
import HummingbirdTesting
import NIOCore
import NIOPosix
import Testing

@testable import BFF
@testable import BFFPlatform

/// Connections that send half a request and stop: closed after the idle timeout, capped per
/// process, and never in the way of requests that complete.
@Suite("Connection hygiene", .needsDatabase, .timeLimit(.minutes(2)))
struct ConnectionHygieneTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// `count` connections to `port`, each having sent the start of a request's headers, opened in
    /// batches so that the listen backlog (which a burst of thousands overflows, resetting some) keeps
    /// up. Answers the connections that got their bytes out.
    func halfOpen(_ count: Int, port: Int) async throws -> [any Channel] {
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        var channels: [any Channel] = []
        for batch in stride(from: 0, to: count, by: 100) {
            for _ in batch..<min(count, batch + 100) {
                guard let channel = try? await bootstrap.connect(host: "127.0.0.1", port: port).get() else { continue }
                do {
                    try await channel.writeAndFlush(ByteBuffer(string: "GET /api/v1/chats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")).get()
                    channels.append(channel)
                } catch {
                    try? await channel.close()
                }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return channels
    }

    /// A request over a connection of its own (the test client's one connection is itself closed
    /// once idle past the timeout): its status.
    func status(port: Int, _ path: String, as learner: Learner? = nil) async throws -> UInt {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        if let learner { request.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)") }
        return try await HTTPClient.shared.execute(request, timeout: .seconds(10)).status.code
    }

    /// How many of `channels` the server has closed within `limit`.
    func closed(_ channels: [any Channel], within limit: Duration) async throws -> Int {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if channels.allSatisfy({ !$0.isActive }) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return channels.filter { !$0.isActive }.count
    }

    @Test("2,000 connections stuck in their headers are closed after BFF_HTTP_IDLE_TIMEOUT; requests keep being served meanwhile")
    func stuckHeadersClosed() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_HTTP_IDLE_TIMEOUT": "2", "BFF_LOG_LEVEL": "critical"])
        try await app.live { client in
            let port = try #require(client.port)
            let stuck = try await halfOpen(2_000, port: port)
            #expect(stuck.count >= 1_900, "\(stuck.count) connections got their bytes out")
            for _ in 0..<20 {
                #expect(try await status(port: port, "/api/v1/chats", as: learner) == 200)
            }
            #expect(try await closed(stuck, within: .seconds(15)) == stuck.count)
            #expect(try await status(port: port, "/api/v1/chats", as: learner) == 200)
        }
    }

    @Test("at BFF_HTTP_MAX_CONNECTIONS `bff serve` accepts no more until one closes, says so, and serves again after")
    func connectionCap() async throws {
        // The real binary: HummingbirdTesting's live server drops the connection delegate.
        let server = try BFFProcess(
            ["serve"],
            environment: TestEnvironment.serverEnvironment(
                database: database,
                ["BFF_LOG_LEVEL": "warning", "BFF_HTTP_IDLE_TIMEOUT": "2", "BFF_HTTP_MAX_CONNECTIONS": "64", "BFF_JOBS_CONCURRENCY": "0"]),
            port: try await BFFProcess.freePort())
        defer { server.stop() }
        let (port, log) = (server.port, server.log)
        #expect(try await server.becomesReady())

        // Over the cap: the rest wait in the listen backlog, not in the server.
        let stuck = try await halfOpen(100, port: port)
        let said: @Sendable () -> Int = { (try? String(contentsOf: log, encoding: .utf8))?.components(separatedBy: "the connection cap is reached").count ?? 1 }
        #expect(try await eventually(within: .seconds(5)) { said() > 1 })
        #expect(try await closed(stuck, within: .seconds(20)) == stuck.count)
        #expect(said() - 1 <= 2, "said \(said() - 1) times")
        #expect(try await status(port: port, "/healthz") == 200)
    }
}
