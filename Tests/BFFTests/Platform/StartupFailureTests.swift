import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Start-up failure", .needsDatabase, .timeLimit(.minutes(3)))
struct StartupFailureTests {
    @Test("a taken port makes the server fail within seconds, not run on (the maintenance loop once spun after cancellation)")
    func takenPort() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let holder = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(holder.localAddress?.port)
        let app = try await makeTestApp(
            database: database, environment: ["BFF_HTTP_HOST": "127.0.0.1", "BFF_HTTP_PORT": String(port)])

        let outcome = NIOLockedValueBox<Result<Void, any Error>?>(nil)
        // Unstructured on purpose: a server that never stops must fail this test, not hang the run.
        let running = Task {
            do {
                try await app.run()
                outcome.withLockedValue { $0 = .success(()) }
            } catch {
                outcome.withLockedValue { $0 = .failure(error) }
            }
        }
        let start = ContinuousClock.now
        while outcome.withLockedValue({ $0 }) == nil, ContinuousClock.now - start < .seconds(10) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let result = outcome.withLockedValue { $0 }
        try await holder.close()
        guard let result else {
            running.cancel()
            Issue.record("the server was still running 10 s after failing to bind its port")
            return
        }
        if case .success = result { Issue.record("run() returned normally although the port was taken") }
    }

    @Test(
        "a live test whose server cannot start fails with the start-up error instead of waiting for a port forever",
        .timeLimit(.minutes(1)))
    func liveTestOfAServerThatCannotStart() async throws {
        let behind = try await TestDatabases.shared.makeEmpty()
        let logs = LogCapture()
        let app = try await makeTestApp(database: behind, logs: logs)
        let start = ContinuousClock.now
        let refusal = await #expect(throws: MigrationError.self) {
            try await app.live { _ in Issue.record("the server served a database whose schema is behind") }
        }
        if case .schemaBehind(current: 0, latest: _)? = refusal {} else { Issue.record("unexpected \(String(describing: refusal))") }
        #expect(ContinuousClock.now - start < .seconds(10))
        // Housekeeping waits for start-up's checks: it never ran against the schema it refused.
        #expect(!logs.all.contains { $0.contains("maintenance purge failed") }, "\(logs.all)")
    }

    @Test(
        "with no database answering, the server and bff migrate stop after 6 x BFF_DATABASE_TIMEOUT, naming BFF_DATABASE_URL",
        .timeLimit(.minutes(1)))
    func unreachableDatabase() async throws {
        let nowhere = try DatabaseURL(parsing: "postgres://bff@127.0.0.1:1/bff")
        let environment = TestEnvironment.serverEnvironment(database: nowhere, ["BFF_DATABASE_TIMEOUT": "1", "BFF_LOG_LEVEL": "critical"])
        let start = ContinuousClock.now
        let migrate = await #expect(throws: StartupError.self) { try await Commands.migrate(environment: environment) }
        #expect(migrate?.description.contains("bff@127.0.0.1:1/bff (BFF_DATABASE_URL) within 6 s") == true, "\(String(describing: migrate))")
        #expect(ContinuousClock.now - start < .seconds(12))

        let app = try await makeTestApp(database: nowhere, environment: ["BFF_DATABASE_TIMEOUT": "1", "BFF_LOG_LEVEL": "critical"])
        let served = await #expect(throws: StartupError.self) {
            try await app.live { _ in Issue.record("the server started without a database") }
        }
        #expect(served?.description.contains("BFF_DATABASE_URL") == true)
        #expect(ContinuousClock.now - start < .seconds(24))
    }
}
