import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

#if canImport(Glibc)
import Glibc
#endif

/// `bff serve` as operators run it: the real binary, stopped with SIGTERM.
@Suite("Graceful shutdown", .needsDatabase, .timeLimit(.minutes(3)))
struct GracefulShutdownTests {
    @Test("SIGTERM lets a request in flight finish with its answer, refuses new connections, and the process exits 0 within the grace")
    func sigtermDrains() async throws {
        let binary = TestEnvironment.repository.appendingPathComponent(".build/debug/bff").path
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build bff first (scripts/test does)")
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        // A port of its own: taken from the kernel, then handed to the server.
        let probe = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(probe.localAddress?.port)
        try await probe.close()

        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["serve"]
        server.environment = TestEnvironment.serverEnvironment(
            database: database,
            [
                "BFF_HTTP_PORT": String(port), "BFF_LOG_LEVEL": "critical", "BFF_SHUTDOWN_GRACE": "10", "BFF_DATABASE_TIMEOUT": "10",
            ]
        ).merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { server.terminate() } }
        let base = "http://127.0.0.1:\(port)"
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)
        defer { _ = http.shutdown() }
        var ready = false
        for _ in 0..<200 where !ready {
            ready = (try? await http.execute(HTTPClientRequest(url: "\(base)/readyz"), timeout: .seconds(2)))?.status == .ok
            if !ready { try await Task.sleep(for: .milliseconds(50)) }
        }
        try #require(ready, "bff serve did not become ready")

        // The chat list waits for a lock this test holds, so the request is in flight when SIGTERM comes.
        let inFlight: Task<HTTPClientResponse, any Error> = try await database.withClient { client in
            try await client.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                _ = try await connection.query("LOCK TABLE chats IN ACCESS EXCLUSIVE MODE", logger: TestEnvironment.quietLogger)
                var request = HTTPClientRequest(url: "\(base)/api/v1/chats")
                request.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
                let inFlight = Task { try await http.execute(request, timeout: .seconds(20)) }
                // Until the server's query waits for the lock.
                try #require(try await connection.awaitLockWaiter(on: "chats"), "the request never reached the database")
                kill(server.processIdentifier, SIGTERM)
                // New connections are refused once the server stopped listening.
                var refused = false
                for _ in 0..<100 where !refused {
                    refused = (try? await http.execute(HTTPClientRequest(url: "\(base)/healthz"), timeout: .seconds(1))) == nil
                    if !refused { try await Task.sleep(for: .milliseconds(50)) }
                }
                #expect(refused, "a new request was still served after SIGTERM")
                #expect(server.isRunning, "the server exited with a request in flight")
                return inFlight
            }
        }
        // The lock went with the transaction: the request in flight completes, with its answer.
        let response = try await inFlight.value
        #expect(response.status == .ok)
        let start = ContinuousClock.now
        while server.isRunning, ContinuousClock.now - start < .seconds(15) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!server.isRunning, "bff serve still ran 15 s after SIGTERM")
        if !server.isRunning { #expect(server.terminationStatus == 0) }
    }
}
