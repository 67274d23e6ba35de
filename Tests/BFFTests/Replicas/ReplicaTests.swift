import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// Two `bff serve` processes and one `bff jobs work` on one database, as operators run them:
/// everything a learner does through either server agrees, limits hold across both, and each job
/// runs once.
@Suite("Replicas and a worker share one truth", .needsDatabase, .timeLimit(.minutes(3)))
struct ReplicaTests {
    @Test("login, refresh, limits, revocation and jobs agree across two servers and a worker")
    func sharedTruth() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let llm = LocalLLM { request, _ in request.responseFormat != nil ? .reply([#"{"misconceptions":[]}"#]) : .reply(["どうして？"]) }
        try await LocalIdP().serve { idp in
            try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { llmBase in
                let environment = TestEnvironment.serverEnvironment(
                    database: database,
                    [
                        "BFF_OIDC_ISSUER": idp.issuer, "BFF_LOG_LEVEL": "info", "BFF_REVOCATION_POLL_INTERVAL": "1",
                        "BFF_AUTH_DEVICE_RATE_LIMIT": "4", "BFF_JOBS_CONCURRENCY": "0", "BFF_LLM_BASE_URL": "\(llmBase)/v1",
                        "BFF_LLM_API_KEY": llm.apiKey, "BFF_LLM_MODEL": llm.model,
                    ])
                let a = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
                defer { a.stop() }
                let b = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
                defer { b.stop() }
                let worker = try BFFProcess(["jobs", "work"], environment: environment.merging(["BFF_JOBS_CONCURRENCY": "4"]) { $1 })
                defer { worker.stop() }
                for server in [a, b] {
                    #expect(try await server.becomesReady())
                }

                // A login started on A and finished on B.
                let login = AppLogin(deviceID: "replica-phone-1")
                let started = try await BFFProcess.send(.GET, "\(a.base)\(login.startURI)")
                #expect(started.status == 200)
                let state = try #require(started.body["state"] as? String)
                let query = URLComponents(string: try #require(started.body["authorization_url"] as? String))?.queryItems ?? []
                var claims = TestIDClaims(iss: .init(value: idp.issuer))
                claims.nonce = query.first { $0.name == "nonce" }?.value
                let code = "code-" + SecureRandom.token()
                idp.grant(code: code, challenge: try #require(query.first { $0.name == "code_challenge" }?.value), idToken: try await idp.sign(claims))
                let signedIn = try await BFFProcess.send(.GET, "\(b.base)\(login.callbackURI(code: code, state: state))")
                #expect(signedIn.status == 200, "\(signedIn.body)")
                let access = try #require(signedIn.body["access_token"] as? String)
                let refresh = try #require(signedIn.body["refresh_token"] as? String)
                let userText = (signedIn.body["user"] as? [String: Any])?["id"] as? String
                let userID = try #require(userText.flatMap { UUID(uuidString: $0) })

                // A refresh on A and its retry on B get the same pair.
                let body = #"{"refresh_token":"\#(refresh)","device_id":"replica-phone-1"}"#
                let first = try await BFFProcess.send(.POST, "\(a.base)/api/v1/auth/refresh", json: body)
                let retry = try await BFFProcess.send(.POST, "\(b.base)/api/v1/auth/refresh", json: body)
                #expect(first.status == 200 && retry.status == 200)
                #expect(first.body["refresh_token"] as? String == retry.body["refresh_token"] as? String)
                // 20 refreshes of the child at once, split across both: one rotation, one head, every
                // success answering the same pair.
                let child = try #require(first.body["refresh_token"] as? String)
                let childBody = #"{"refresh_token":"\#(child)","device_id":"replica-phone-1"}"#
                let rotations = try await withThrowingTaskGroup(of: (UInt, String?).self) { group in
                    for index in 0..<20 {
                        group.addTask {
                            let answer = try await BFFProcess.send(.POST, "\(index % 2 == 0 ? a.base : b.base)/api/v1/auth/refresh", json: childBody)
                            return (answer.status, answer.body["refresh_token"] as? String)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                // The session's refresh limit (10 a minute) is exact across both: the two above and 8 of these.
                #expect(rotations.filter { $0.0 == 200 }.count == 8 && rotations.filter { $0.0 == 429 }.count == 12, "\(rotations.map(\.0))")
                #expect(Set(rotations.filter { $0.0 == 200 }.compactMap(\.1)).count == 1)
                let heads = try await database.withClient { client in
                    for try await count in try await client.query(
                        "SELECT count(*)::int FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE f.user_id = \(userID) AND t.used_at IS NULL"
                    ).decode(Int.self) { return count }
                    return -1
                }
                #expect(heads == 1)

                // The login limit per device is exact across both: 4 a minute.
                var starts: [UInt] = []
                for index in 0..<6 {
                    starts.append(try await BFFProcess.send(.GET, "\(index % 2 == 0 ? a.base : b.base)\(AppLogin(deviceID: "replica-limit-1").startURI)").status)
                }
                #expect(starts == [200, 200, 200, 200, 429, 429], "\(starts)")

                // The tutoring turn's 5 per 10 seconds, across both; each stored turn's tag job runs once, on the worker.
                var turns: [UInt] = []
                for index in 0..<6 {
                    turns.append(
                        try await BFFProcess.send(.POST, "\(index % 2 == 0 ? a.base : b.base)/api/v1/chat", token: access, json: #"{"message": "植物は光合成をします。"}"#).status)
                }
                #expect(turns == [200, 200, 200, 200, 200, 429], "\(turns)")
                #expect(try await eventually(within: .seconds(20)) { llm.received.withLockedValue { $0.filter { $0.responseFormat != nil }.count } >= 5 })
                try await Task.sleep(for: .seconds(1))
                #expect(llm.received.withLockedValue { $0.filter { $0.responseFormat != nil }.count } == 5)
                let jobs = try await database.withClient { client in
                    var rows: [(String, Int)] = []
                    for try await row in try await client.query("SELECT state, attempt FROM jobs WHERE kind = 'tags.extract'").decode((String, Int).self) { rows.append(row) }
                    return rows
                }
                #expect(jobs.count == 5 && jobs.allSatisfy { $0.0 == "completed" && $0.1 == 1 }, "\(jobs)")

                // A logout on A is refused by B within the revocation poll.
                #expect(try await BFFProcess.send(.GET, "\(b.base)/api/v1/me", token: access).status == 200)
                #expect(try await BFFProcess.send(.POST, "\(a.base)/api/v1/auth/logout", token: access).status == 204)
                #expect(
                    try await eventually(within: .seconds(4), every: .milliseconds(100)) {
                        try await BFFProcess.send(.GET, "\(b.base)/api/v1/me", token: access).status == 401
                    })
            }
        }
    }

    @Test("drain: SIGTERM to one server under steady load fails no request it accepted, it exits 0 within the grace, the other keeps serving")
    func drain() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        let environment = TestEnvironment.serverEnvironment(
            database: database, ["BFF_LOG_LEVEL": "warning", "BFF_SHUTDOWN_GRACE": "10", "BFF_JOBS_CONCURRENCY": "0"])
        let a = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
        defer { a.stop() }
        let b = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
        defer { b.stop() }
        for server in [a, b] {
            #expect(try await server.becomesReady())
        }
        // Each request on a connection of its own: one the server stopped accepting is refused, never half-served.
        @Sendable func once(_ server: BFFProcess) async -> String {
            var request = HTTPClientRequest(url: "\(server.base)/api/v1/chats")
            request.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
            request.headers.add(name: "Connection", value: "close")
            do {
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
                _ = try await response.body.collect(upTo: 1 << 20)
                return String(response.status.code)
            } catch {
                let text = "\(error)"
                if text.contains("refused") { return "refused" }
                // A connection still in the kernel's listen backlog when the server closes its socket is
                // reset by the kernel: the server never accepted it, and nothing of it was served.
                if text.contains("Connection reset by peer") { return "reset before accept" }
                // Accepted but not yet read when the drain began: the server closes such a connection
                // without starting its request (no request is in flight on it), as HTTP allows; the
                // client may send it again (RFC 9112 §9.6).
                if text.contains("remoteConnectionClosed") { return "closed before read" }
                return "error: \(text)"
            }
        }
        let started = ContinuousClock.now
        let outcomes = try await withThrowingTaskGroup(of: (String, [String]).self) { group in
            for (name, server) in [("a", a), ("b", b)] {
                for _ in 0..<4 {
                    group.addTask {
                        var seen: [String] = []
                        while ContinuousClock.now - started < .seconds(4) { seen.append(await once(server)) }
                        return (name, seen)
                    }
                }
            }
            try await Task.sleep(for: .seconds(1))
            kill(a.process.processIdentifier, SIGTERM)
            return try await group.reduce(into: [String: [String]]()) { $0[$1.0, default: []] += $1.1 }
        }
        let exited = ContinuousClock.now
        a.process.waitUntilExit()
        #expect(ContinuousClock.now - exited < .seconds(11))
        #expect(a.process.terminationStatus == 0)
        let onA = outcomes["a"] ?? [], onB = outcomes["b"] ?? []
        #expect(
            onA.filter { $0 == "200" }.count > 10 && onA.allSatisfy { ["200", "refused", "reset before accept", "closed before read"].contains($0) },
            "\(Set(onA))")
        // At most one per client: only a connection made in the instant the drain began.
        #expect(onA.filter { $0 == "reset before accept" || $0 == "closed before read" }.count <= 4)
        #expect(onB.count > 20 && onB.allSatisfy { $0 == "200" }, "\(Set(onB))")
    }
}
