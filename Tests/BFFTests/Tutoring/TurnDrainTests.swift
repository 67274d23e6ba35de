import AsyncHTTPClient
import Foundation
import NIOCore
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// A tutoring turn that outlasts a drain: at the drain deadline (80 % of `BFF_SHUTDOWN_GRACE`) it
/// ends with an answer instead of a cut connection, and keeps only what was stored before.
@Suite("A turn at the drain deadline", .needsDatabase, .timeLimit(.minutes(2)))
struct TurnDrainTests {
    @Test("SIGTERM mid-stream: the stream ends with event: error not_ready, the JSON turn answers 503, nothing half-stored, the key given back, exit 0 within the grace")
    func turnAtDeadline() async throws {
        let database = try await TestDatabases.shared.makeMigrated()
        let learner = try await Learner.make(database: database)
        // The first turn answers at once; the later ones would stream for 30 s.
        let llm = LocalLLM { request, number in
            if request.responseFormat != nil { return .reply([#"{"misconceptions":[]}"#]) }
            return number == 1 ? .reply(["はい"]) : .reply(Array(repeating: "。", count: 60), interval: .milliseconds(500))
        }
        try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { llmBase in
            let environment = TestEnvironment.serverEnvironment(
                database: database,
                [
                    "BFF_LLM_BASE_URL": "\(llmBase)/v1", "BFF_LLM_API_KEY": llm.apiKey, "BFF_LLM_MODEL": llm.model, "BFF_SHUTDOWN_GRACE": "5",
                    "BFF_JOBS_CONCURRENCY": "0",
                ])
            let server = try BFFProcess(["serve"], environment: environment, port: try await BFFProcess.freePort())
            defer { server.stop() }
            #expect(try await server.becomesReady())
            let first = try await BFFProcess.send(.POST, "\(server.base)/api/v1/chat", token: learner.accessToken, json: #"{"message": "光合成とは？"}"#)
            #expect(first.status == 200)
            let chatID = try #require(first.body["chat_id"] as? String)

            // A streamed turn and a JSON one, both waiting on the LLM when SIGTERM comes.
            var streamed = HTTPClientRequest(url: "\(server.base)/api/v1/chat")
            streamed.method = .POST
            streamed.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
            streamed.headers.add(name: "Accept", value: "text/event-stream")
            streamed.headers.add(name: "Content-Type", value: "application/json")
            streamed.headers.add(name: "Idempotency-Key", value: "drain-turn-1")
            streamed.body = .bytes(ByteBuffer(string: #"{"chat_id": "\#(chatID)", "message": "葉緑体で起きます。"}"#))
            let response = try await HTTPClient.shared.execute(streamed, timeout: .seconds(30))
            #expect(response.status == .ok)
            async let plain = BFFProcess.send(.POST, "\(server.base)/api/v1/chat", token: learner.accessToken, json: #"{"chat_id": "\#(chatID)", "message": "二つ目"}"#)

            var text = ""
            var signalled: ContinuousClock.Instant?
            for try await chunk in response.body {
                text += String(buffer: chunk)
                if signalled == nil, text.contains("event: delta") {
                    try await Task.sleep(for: .milliseconds(300))  // the JSON turn is under way too
                    kill(server.process.processIdentifier, SIGTERM)
                    signalled = .now
                }
            }
            let ended = ContinuousClock.now
            let sent = try #require(signalled)
            // The stream's last event says why it ends, at the deadline (4 s), well before the grace's end.
            let events = text.components(separatedBy: "\n\n").filter { !$0.isEmpty }
            #expect(events.last?.hasPrefix("event: error\ndata: {\"code\":\"not_ready\"") == true, "\(events.suffix(2))")
            #expect(!events.contains { $0.hasPrefix("event: done") })
            #expect(ended - sent >= .seconds(3) && ended - sent < .seconds(5), "\(ended - sent)")
            let answer = try await plain
            #expect(answer.status == 503 && answer.body["code"] as? String == "not_ready", "\(answer)")

            server.process.waitUntilExit()
            #expect(ContinuousClock.now - sent < .seconds(6))
            #expect(server.process.terminationStatus == 0)

            // Only the first turn is stored; the streamed turn's key is free for the re-send.
            let (messages, keys) = try await database.withClient { client in
                var counts = (0, 0)
                for try await count in try await client.query("SELECT count(*)::int FROM messages WHERE user_id = \(learner.id)").decode(Int.self) {
                    counts.0 = count
                }
                for try await count in try await client.query("SELECT count(*)::int FROM idempotency_keys WHERE user_id = \(learner.id)").decode(Int.self) {
                    counts.1 = count
                }
                return counts
            }
            #expect(messages == 2 && keys == 0, "\(messages) messages, \(keys) keys")
        }
    }
}
