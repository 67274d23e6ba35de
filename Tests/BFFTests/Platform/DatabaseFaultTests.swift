import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Database outage", .needsDatabase, .serialized, .timeLimit(.minutes(3)))
struct DatabaseFaultTests {
    @Test("PostgreSQL stopped under a running server: readyz 503 within 5 s, requests 503 database_unavailable, recovery within 10 s")
    func outageAndRecovery() async throws {
        let cluster = try ThrowawayCluster()
        try await cluster.run("destroy")
        try await cluster.run("init")
        try await cluster.run("start")
        do {
            try await exercise(cluster)
        } catch {
            try? await cluster.run("destroy")
            throw error
        }
        try await cluster.run("destroy")
    }

    @Test("PostgreSQL frozen mid-statement (a partition, no answer and no error): requests are 503 at the deadline, and all is well after it wakes")
    func frozenDatabase() async throws {
        let cluster = try ThrowawayCluster()
        try await cluster.run("destroy")
        try await cluster.run("init")
        try await cluster.run("start")
        do {
            try await freezeAndWake(cluster)
        } catch {
            try? await Self.signal("CONT", cluster)
            try? await cluster.run("destroy")
            throw error
        }
        try await cluster.run("destroy")
    }

    private func freezeAndWake(_ cluster: ThrowawayCluster) async throws {
        let database = try cluster.url
        _ = try await database.withClient(poolSize: 2) { client in
            try await Migrator(directory: TestEnvironment.migrationsDirectory, logger: TestEnvironment.quietLogger).migrate(client: client)
        }
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_DATABASE_TIMEOUT": "2", "BFF_LOG_LEVEL": "critical"])
        try await app.live { client in
            #expect(try await client.call(.get, "/api/v1/chats", as: learner).status == .ok)
            #expect(try await client.call(.get, "/api/v1/settings", as: learner).status == .ok)
            // Every process of the cluster stopped: the connections stay open, and nothing answers,
            // not even statement_timeout. The test wakes it 10 s later, bounding a request held till then.
            try await Self.signal("STOP", cluster)
            let waking = Task {
                try await Task.sleep(for: .seconds(10))
                try await Self.signal("CONT", cluster)
            }
            // One after the other (the test client has one connection), each within its 2 s deadline
            // and the 1 s it may wait for the statement to be ended.
            for path in ["/api/v1/settings", "/api/v1/chats"] {
                let start = ContinuousClock.now
                let response = try await client.call(.get, path, as: learner)
                let waited = ContinuousClock.now - start
                #expect(
                    response.status == .serviceUnavailable && response.errorCode == "database_unavailable",
                    "\(path): \(response.status) \(response.text)")
                #expect(waited < .seconds(4.5), "\(path) waited \(waited) for a frozen database")
            }

            try await waking.value
            let wokenAt = ContinuousClock.now
            var status = HTTPResponse.Status.serviceUnavailable
            while status != .ok, ContinuousClock.now - wokenAt < .seconds(10) {
                status = try await client.call(.get, "/api/v1/chats", as: learner).status
                if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(status == .ok, "the chat list not back 10 s after the database woke")
        }
    }

    /// Sends SIGSTOP or SIGCONT to the cluster's postmaster and every process it started.
    private static func signal(_ name: String, _ cluster: ThrowawayCluster) async throws {
        let postmaster =
            try String(contentsOfFile: "\(cluster.dataDirectory)/postmaster.pid", encoding: .utf8)
            .split(separator: "\n").first.map(String.init) ?? ""
        let status = try await ThrowawayCluster.runProcess(
            "/bin/sh", ["-c", "pkill -\(name) -P \(postmaster); kill -\(name) \(postmaster)"], limit: .seconds(10))
        guard status == 0 else { throw TestSetupError("could not send SIG\(name) to PostgreSQL \(postmaster)") }
    }

    @Test("a statement stuck behind a row lock ends at the deadline: 503 database_unavailable, nothing changed, the server fine after")
    func lockWaitEndsAtTheDeadline() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_DATABASE_TIMEOUT": "2"])
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"before"}"#)
            let id = try #require((created.json["id"] as? String).flatMap(UUID.init(uuidString:)))
            let (locked, signal) = AsyncStream.makeStream(of: Void.self)
            // Another session (an operator's open transaction, a slow job) holds the chat's row.
            let holder = Task {
                defer { signal.finish() }
                try await database.withClient { other in
                    try await other.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                        _ = try await connection.query("SELECT 1 FROM chats WHERE id = \(id) FOR UPDATE", logger: TestEnvironment.quietLogger)
                        signal.finish()
                        try await Task.sleep(for: .seconds(8))
                    }
                }
            }
            for await _ in locked {}
            let start = ContinuousClock.now
            let renamed = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"after"}"#)
            let waited = ContinuousClock.now - start
            #expect(renamed.status == .serviceUnavailable && renamed.errorCode == "database_unavailable", "\(renamed.status): \(renamed.text)")
            #expect(waited < .seconds(4), "the rename waited \(waited) behind the lock")
            try await holder.value
            let after = try await client.call(.get, "/api/v1/chats/\(id)", as: learner)
            #expect(after.status == .ok && after.json["title"] as? String == "before")
        }
    }

    private func exercise(_ cluster: ThrowawayCluster) async throws {
        let database = try cluster.url
        _ = try await database.withClient(poolSize: 2) { client in
            try await Migrator(directory: TestEnvironment.migrationsDirectory, logger: TestEnvironment.quietLogger).migrate(client: client)
        }

        let learner = try await Learner.make(database: database)
        let batchClient = PostgresClient(configuration: database.clientConfiguration(poolSize: 2))
        let repository = ChatStore.withOwnBatcher(Database(client: batchClient, timeout: .seconds(2), poolSize: 2))
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, environment: ["BFF_DATABASE_TIMEOUT": "2"], logs: logs)
        try await app.live { client in
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            #expect(try await client.call(.get, "/api/v1/chats", as: learner).status == .ok)

            try await cluster.run("stop")
            let stoppedAt = ContinuousClock.now
            var readiness = HTTPResponse.Status.ok
            var notReady: TestResponse?
            while readiness != .serviceUnavailable, ContinuousClock.now - stoppedAt < .seconds(5) {
                let response = try await client.execute(uri: "/readyz", method: .get)
                readiness = response.status
                notReady = response
            }
            #expect(readiness == .serviceUnavailable, "readyz still \(readiness) 5 s after the database stopped")
            // The contract's error body, not an empty 503.
            #expect(notReady?.errorCode == "database_unavailable" && (notReady?.json["message"] as? String)?.isEmpty == false)

            let limited = try await client.execute(
                uri: "/api/v1/auth/start?device_id=device-0001&redirect_uri=com.example.app:/oauth/callback", method: .get)
            #expect(limited.status == .serviceUnavailable)
            #expect(limited.errorCode == "database_unavailable")
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)

            let listed = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect(listed.status == .serviceUnavailable && listed.errorCode == "database_unavailable")

            // A generated operation's error carries its request (headers included) and its decoded
            // input: the 503's log line must name the operation and leak neither.
            let refreshToken = SecureRandom.token()
            let refreshed = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"refresh_token":"\#(refreshToken)","device_id":"device-0001"}"#))
            #expect(refreshed.status == .serviceUnavailable && refreshed.errorCode == "database_unavailable")
            let settings = try await client.call(.get, "/api/v1/settings", as: learner)
            #expect(settings.status == .serviceUnavailable && settings.errorCode == "database_unavailable")
            let outageLines = logs.all.filter { $0.contains("dependency unavailable") }
            #expect(outageLines.contains { $0.contains("authRefresh") } && outageLines.contains { $0.contains("getSettings") })
            #expect(!logs.all.contains { $0.contains(refreshToken) || $0.contains(learner.accessToken) })

            // First pages queue behind one another's statement (one at a time per event loop):
            // behind a dead database each must still fail within about one deadline, not one per batch.
            let listedAt = ContinuousClock.now
            let failures = try await Commands.withDatabase(batchClient) { _ in
                await withTaskGroup(of: Bool.self) { group in
                    for _ in 0..<100 {
                        group.addTask {
                            do {
                                _ = try await repository.newest(userID: learner.id, limit: 20, after: nil)
                                return false
                            } catch {
                                return error is DatabaseUnavailable
                            }
                        }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
            }
            #expect(failures == 100)
            #expect(ContinuousClock.now - listedAt < .seconds(7), "first pages took \(ContinuousClock.now - listedAt) behind a dead database")

            try await cluster.run("start")
            let restartedAt = ContinuousClock.now
            readiness = .serviceUnavailable
            while readiness != .ok, ContinuousClock.now - restartedAt < .seconds(10) {
                readiness = try await client.execute(uri: "/readyz", method: .get).status
                if readiness != .ok { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(readiness == .ok, "readyz not back 10 s after the database restarted")
            // Ready means through every pool: requests that take their turns at all of them succeed.
            for _ in 0..<4 {
                #expect(try await client.call(.get, "/api/v1/chats", as: learner).status == .ok)
            }
        }
    }
}
