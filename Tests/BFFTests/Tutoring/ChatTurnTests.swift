import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

/// `POST /api/v1/chat` through the configured app against a local OpenAI-compatible server: the
/// prompt sent upstream, what is stored, and every failure's answer with nothing half-written.
@Suite("Tutoring turn", .needsDatabase, .timeLimit(.minutes(3)))
struct ChatTurnTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// The app configured against `llm`, served live, with a learner.
    func withTurns<T: Sendable>(
        _ llm: LocalLLM, environment: [String: String] = [:],
        _ body: @escaping @Sendable (any TestClientProtocol, Learner) async throws -> T
    ) async throws -> T {
        try await withTurns(llm, environment: environment) { client, learner, _ in try await body(client, learner) }
    }

    /// The same, handing `body` the local LLM's base URL too.
    func withTurns<T: Sendable>(
        _ llm: LocalLLM, environment: [String: String] = [:],
        _ body: @escaping @Sendable (any TestClientProtocol, Learner, String) async throws -> T
    ) async throws -> T {
        let learner = try await Learner.make(database: database)
        let database = database
        return try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { base in
            let app = try await makeTestApp(
                database: database,
                environment: [
                    "BFF_LLM_BASE_URL": "\(base)/v1", "BFF_LLM_API_KEY": llm.apiKey, "BFF_LLM_MODEL": llm.model, "BFF_LLM_TIMEOUT": "2",
                    "BFF_LLM_TOTAL_TIMEOUT": "4", "BFF_LOG_LEVEL": "critical",
                    // The tag extraction jobs run only where a test runs them.
                    "BFF_JOBS_CONCURRENCY": "0",
                ].merging(environment) { $1 })
            return try await app.live { client in try await body(client, learner, base) }
        }
    }

    /// A turn sent over a connection of its own (the test client sends one request at a time).
    func turnRequest(port: Int, as learner: Learner, json: String, headers extra: [(String, String)] = []) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/v1/chat")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(learner.accessToken)")
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: json))
        return request
    }

    func rows(_ sql: PostgresQuery) async throws -> [[String?]] {
        try await database.withClient { client in
            var rows: [[String?]] = []
            for try await row in try await client.query(sql) {
                rows.append(row.makeRandomAccess().map { $0.bytes.map { String(buffer: $0) } })
            }
            return rows
        }
    }

    func count(_ sql: PostgresQuery) async throws -> Int {
        try await database.withClient { client in
            for try await value in try await client.query(sql).decode(Int.self) { return value }
            return 0
        }
    }

    @Test("a new chat: the reply and the message are stored together, the title is the message's start, the prompt is the role reversal without personal data")
    func newChat() async throws {
        let llm = LocalLLM { _, _ in .reply(["なるほど！", "では、", "光がないとどうなるの？"]) }
        try await withTurns(llm) { client, learner in
            let message = "光合成は植物が光のエネルギーを使って二酸化炭素と水から糖を作るしくみです。葉緑体で行われます。"
            let response = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"\#(message)","topic_id":"biology.cells"}"#)
            #expect(response.status == .ok, "\(response.text)")
            let chatID = try #require(response.json["chat_id"] as? String)
            let user = try #require(response.json["user_message"] as? [String: Any])
            let reply = try #require(response.json["reply"] as? [String: Any])
            #expect(user["role"] as? String == "user" && user["content"] as? String == message)
            #expect(reply["role"] as? String == "assistant" && reply["content"] as? String == "なるほど！では、光がないとどうなるの？")

            let chat = try await client.call(.get, "/api/v1/chats/\(chatID)", as: learner)
            #expect(chat.json["message_count"] as? Int == 2 && chat.json["subject_id"] as? String == "biology")
            #expect(chat.json["title"] as? String == String(message.prefix(40)))
            let history = try await client.call(.get, "/api/v1/chats/\(chatID)/messages", as: learner)
            #expect((history.json["items"] as? [[String: Any]])?.map { $0["role"] as? String } == ["user", "assistant"])

            let sent = try #require(llm.received.withLockedValue { $0.first })
            #expect(sent.messages.count == 2 && sent.messages[0].role == "system" && sent.messages[1].content == message)
            #expect(sent.messages[0].content.contains("生徒役") && sent.messages[0].content.contains("細胞"))
            #expect(!sent.body.contains(learner.id.uuidString.lowercased()) && !sent.body.contains("@"))
            let usage = try await rows("SELECT model, prompt_tokens::text, completion_tokens::text FROM messages WHERE role = 'assistant' AND user_id = \(learner.id)")
            #expect(usage == [[llm.model, "42", "3"]])
        }
    }

    @Test("continuing a chat sends its history; another user's chat is 404; an ended chat is 409 chat_ended until a recall of it is opened")
    func continuing() async throws {
        let llm = LocalLLM { _, number in .reply(["質問\(number)"]) }
        try await withTurns(llm) { client, learner in
            let first = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"一回目の説明"}"#)
            let chatID = try #require(first.json["chat_id"] as? String)
            let second = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"chat_id":"\#(chatID)","message":"二回目の説明"}"#)
            #expect(second.status == .ok && second.json["chat_id"] as? String == chatID)
            let sent = try #require(llm.received.withLockedValue { $0.last })
            #expect(sent.messages.map(\.role) == ["system", "user", "assistant", "user"])
            #expect(sent.messages.dropFirst().map(\.content) == ["一回目の説明", "質問1", "二回目の説明"])

            let stranger = try await Learner.make(database: database)
            let foreign = try await client.call(.post, "/api/v1/chat", as: stranger, json: #"{"chat_id":"\#(chatID)","message":"のぞき見"}"#)
            #expect(foreign.status == .notFound && foreign.errorCode == "not_found")

            let evaluated = try await client.call(.post, "/api/v1/chats/\(chatID)/evaluation", as: learner, json: #"{"score":4}"#)
            #expect(evaluated.status == .ok, "\(evaluated.text)")
            let ended = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"chat_id":"\#(chatID)","message":"続き"}"#)
            #expect(ended.status == .conflict && ended.errorCode == "chat_ended")
            let recalls = try await client.call(.get, "/api/v1/recalls", as: learner)
            let recallID = try #require((recalls.json["items"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await client.call(.post, "/api/v1/recalls/\(recallID)/opened", as: learner).status == .noContent)
            let reopened = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"chat_id":"\#(chatID)","message":"思い出すと"}"#)
            #expect(reopened.status == .ok, "\(reopened.text)")
            #expect(llm.received.withLockedValue { $0.count } == 3, "the refused turns asked the LLM")
        }
    }

    @Test("LLM failures: 503 llm_unavailable with the provider's Retry-After, 422 content_filtered, nothing stored; the app's re-send with the same key then succeeds")
    func failures() async throws {
        let llm = LocalLLM { _, number in
            switch number {
            case 1: .status(429, code: "429", message: "Rate limit reached", headers: ["retry-after": "7"])
            case 2: .truncated(["途中で"])
            case 3: .status(400, code: "content_filter", message: "The response was filtered")
            default: .reply(["こんどは", "答えます"])
            }
        }
        try await withTurns(llm) { client, learner in
            let key: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "outbox-1"]
            let body = #"{"message":"重力について説明します"}"#
            let limited = try await client.call(.post, "/api/v1/chat", as: learner, json: body, headers: key)
            #expect(limited.status == .serviceUnavailable && limited.errorCode == "llm_unavailable" && limited.headers[.retryAfter] == "7")
            let cut = try await client.call(.post, "/api/v1/chat", as: learner, json: body, headers: key)
            #expect(cut.status == .serviceUnavailable && cut.errorCode == "llm_unavailable")
            let filtered = try await client.call(.post, "/api/v1/chat", as: learner, json: body, headers: key)
            #expect(filtered.status == .unprocessableContent && filtered.errorCode == "content_filtered")
            #expect(try await count("SELECT count(*)::int8 FROM chats WHERE user_id = \(learner.id)") == 0)
            #expect(try await count("SELECT count(*)::int8 FROM messages WHERE user_id = \(learner.id)") == 0)
            let answered = try await client.call(.post, "/api/v1/chat", as: learner, json: body, headers: key)
            #expect(answered.status == .ok && (answered.json["reply"] as? [String: Any])?["content"] as? String == "こんどは答えます")
            #expect(try await count("SELECT count(*)::int8 FROM messages WHERE user_id = \(learner.id)") == 2)
        }
    }

    @Test("idempotent re-send: the first turn's answer without a second upstream call; another body is 422; a re-send while the first runs is 409")
    func idempotency() async throws {
        let llm = LocalLLM { request, _ in
            request.messages.last?.content == "ゆっくり" ? .reply(["遅い返事"], firstChunkAfter: .seconds(1.5)) : .reply(["一度だけ"])
        }
        try await withTurns(llm) { client, learner in
            let key: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "outbox-2"]
            let first = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"一度だけ送る"}"#, headers: key)
            let again = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"一度だけ送る"}"#, headers: key)
            #expect(first.status == .ok && again.status == .ok)
            #expect(NSDictionary(dictionary: first.json) == NSDictionary(dictionary: again.json))
            #expect(llm.received.withLockedValue { $0.count } == 1)
            let reused = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"別の本文"}"#, headers: key)
            #expect(reused.status == .unprocessableContent && reused.errorCode == "idempotency_key_reused")

            // The test client sends one request at a time: the duplicate goes over a connection of its own.
            let slowKey: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "outbox-3"]
            let running = Task { try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"ゆっくり"}"#, headers: slowKey) }
            #expect(try await eventually(within: .seconds(5)) { llm.received.withLockedValue { $0.count } == 2 })
            let duplicate = turnRequest(
                port: try #require(client.port), as: learner, json: #"{"message":"ゆっくり"}"#, headers: [("Idempotency-Key", "outbox-3")])
            let answer = try await HTTPClient.shared.execute(duplicate, timeout: .seconds(10))
            let text = String(buffer: try await answer.body.collect(upTo: 65536))
            #expect(answer.status == .conflict && text.contains("idempotency_in_progress"), "\(answer.status) \(text)")
            #expect(try await running.value.status == .ok)
        }
    }

    @Test("rate limit: 5 turns per 10 s per user; of 20 concurrent turns exactly 5 pass, the rest are 429 with Retry-After before any LLM call")
    func rateLimit() async throws {
        let llm = LocalLLM { _, _ in .reply(["はい"]) }
        try await withTurns(llm) { client, learner in
            // Over connections of their own (the test client sends one request at a time).
            let port = try #require(client.port)
            let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let request = turnRequest(port: port, as: learner, json: #"{"message":"説明\#(index)"}"#)
                        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                        _ = try await response.body.collect(upTo: 65536)
                        let retryAfter = response.headers.first(name: "Retry-After")
                        // A refusal says the limit too.
                        let limit = response.headers.first(name: "RateLimit-Limit")
                        return (Int(response.status.code), retryAfter.flatMap { limit == "5" ? $0 : nil })
                    }
                }
                var all: [(Int, String?)] = []
                for try await status in group { all.append(status) }
                return all
            }
            #expect(statuses.filter { $0.0 == 200 }.count == 5)
            #expect(statuses.filter { $0.0 == 429 }.count == 15 && statuses.filter { $0.0 == 429 }.allSatisfy { $0.1 != nil })
            #expect(llm.received.withLockedValue { $0.count } == 5)
        }
    }

    @Test("bad input: a blank message, an unknown topic, a malformed chat id; without a configured LLM, 503 llm_unavailable")
    func badInput() async throws {
        let llm = LocalLLM()
        try await withTurns(llm) { client, learner in
            for (body, code) in [
                (#"{"message":"   "}"#, "validation_failed"), (#"{"message":"x","topic_id":"no.such.topic"}"#, "unknown_topic"),
                (#"{"message":"x","chat_id":"not-a-uuid"}"#, "validation_failed"), (#"{"chat_id":null}"#, "validation_failed"),
                (#"{"message":"a\u0000b"}"#, "validation_failed"), (#"{"message":"\#(String(repeating: "a", count: 8001))"}"#, "validation_failed"),
            ] {
                let response = try await client.call(.post, "/api/v1/chat", as: learner, json: body)
                #expect(response.status == .unprocessableContent && response.errorCode == code, "\(body): \(response.text)")
            }
            #expect(llm.received.withLockedValue { $0.isEmpty })
        }
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_LOG_LEVEL": "critical"])
        try await app.test(.router) { client in
            let response = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"設定なし"}"#)
            #expect(response.status == .serviceUnavailable && response.errorCode == "llm_unavailable")
        }
    }

    /// A turn sent with `Accept: text/event-stream` over a connection of its own; hands each event
    /// (name, data) to `onEvent` as it arrives, with the time it arrived. Returns the status and content type.
    func stream(
        port: Int, as learner: Learner, json: String, onEvent: @escaping @Sendable (String, String, Date) -> Bool = { _, _, _ in true }
    ) async throws -> (status: Int, contentType: String?, events: [(String, String)]) {
        let request = turnRequest(port: port, as: learner, json: json, headers: [("Accept", "text/event-stream")])
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
        var events: [(String, String)] = []
        var pending = ""
        reading: for try await buffer in response.body {
            pending += String(buffer: buffer)
            while let end = pending.range(of: "\n\n") {
                let block = pending[..<end.lowerBound]
                pending = String(pending[end.upperBound...])
                var name = "message", data = ""
                for line in block.split(separator: "\n") {
                    if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                    if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
                }
                events.append((name, data))
                // The caller may stop reading here, as a client that goes away does.
                guard onEvent(name, data, Date()) else { break reading }
            }
        }
        return (Int(response.status.code), response.headers.first(name: "Content-Type"), events)
    }

    @Test("streamed: each piece is a delta event as it arrives, the first long before the upstream's last; then done with the stored turn")
    func streamed() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして", "葉は", "緑", "なの", "？"], interval: .milliseconds(200)) }
        try await withTurns(llm) { client, learner in
            let firstDelta = NIOLockedValueBox<Date?>(nil)
            let outcome = try await stream(port: try #require(client.port), as: learner, json: #"{"message":"葉緑体の説明です"}"#) { name, _, at in
                if name == "delta" { firstDelta.withLockedValue { if $0 == nil { $0 = at } } }
                return true
            }
            let done = Date()
            #expect(outcome.status == 200 && outcome.contentType?.hasPrefix("text/event-stream") == true)
            #expect(outcome.events.map(\.0) == ["delta", "delta", "delta", "delta", "delta", "done"])
            let texts = outcome.events.dropLast().compactMap { try? JSONSerialization.jsonObject(with: Data($0.1.utf8)) as? [String: String] }
            #expect(texts.map { $0["text"] ?? "" }.joined() == "どうして葉は緑なの？")
            let sentFirst = try #require(llm.firstChunkSent.withLockedValue { $0.first })
            let first = try #require(firstDelta.withLockedValue { $0 })
            // Timestamps: the BFF forwarded the first piece at once, not after the upstream's last (800 ms later).
            #expect(first.timeIntervalSince(sentFirst) < 0.4, "first delta \(first.timeIntervalSince(sentFirst)) s after the upstream sent it")
            #expect(done.timeIntervalSince(first) > 0.6)
            let last = try #require(outcome.events.last)
            let body = try #require(try JSONSerialization.jsonObject(with: Data(last.1.utf8)) as? [String: Any])
            let chatID = try #require(body["chat_id"] as? String)
            #expect((body["reply"] as? [String: Any])?["content"] as? String == "どうして葉は緑なの？")
            let history = try await client.call(.get, "/api/v1/chats/\(chatID)/messages", as: learner)
            #expect(
                (history.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
                    == [(body["user_message"] as? [String: Any])?["id"] as? String, (body["reply"] as? [String: Any])?["id"] as? String].compactMap { $0 })
        }
    }

    @Test("a client that leaves mid-stream loses nothing: the reply is completed and stored; a failure mid-stream is an error event, nothing stored; refusals before the stream are JSON")
    func streamFaults() async throws {
        let llm = LocalLLM { request, _ in
            request.messages.last?.content == "途中で切れる" ? .truncated(["それは", "なぜ"]) : .reply(["ゆっくり", "答える", "ね"], interval: .milliseconds(300))
        }
        try await withTurns(llm) { client, learner in
            let port = try #require(client.port)
            let left = try await stream(port: port, as: learner, json: #"{"message":"途中で帰ります"}"#) { name, _, _ in name != "delta" }
            #expect(left.events.map(\.0) == ["delta"])
            let stored = try await eventually(within: .seconds(10)) {
                try await count("SELECT count(*)::int8 FROM messages WHERE user_id = \(learner.id) AND content = 'ゆっくり答えるね'") == 1
            }
            #expect(stored, "the reply of a stream the client left was not stored")

            let failed = try await stream(port: port, as: learner, json: #"{"message":"途中で切れる"}"#)
            #expect(failed.events.map(\.0) == ["delta", "delta", "error"])
            #expect(failed.events.last?.1.contains(#""code":"llm_unavailable""#) == true)
            #expect(try await count("SELECT count(*)::int8 FROM messages WHERE user_id = \(learner.id)") == 2)

            let stranger = try await Learner.make(database: database)
            let chats = try await rows("SELECT id::text FROM chats WHERE user_id = \(learner.id)")
            let chatID = try #require(chats.first?.first ?? nil)
            let refused = try await stream(port: port, as: stranger, json: #"{"chat_id":"\#(chatID)","message":"のぞき見"}"#)
            #expect(refused.status == 404 && refused.contentType?.hasPrefix("application/json") == true)
        }
    }

    @Test("the instant question: a new chat whose first message is the AI's question on the subject, topic and difficulty; the learner's answer continues it")
    func instantQuestion() async throws {
        let llm = LocalLLM { _, number in .reply([number == 1 ? "細胞膜はどんな役割をしているの？" : "なるほど、ではなぜ？"]) }
        try await withTurns(llm) { client, learner in
            let asked = try await client.call(
                .post, "/api/v1/chat", as: learner, json: #"{"mode":"question","subject_id":"biology","topic_id":"biology.cells","difficulty":2}"#)
            #expect(asked.status == .ok, "\(asked.text)")
            #expect(asked.json["user_message"] == nil)
            #expect((asked.json["reply"] as? [String: Any])?["content"] as? String == "細胞膜はどんな役割をしているの？")
            let chatID = try #require(asked.json["chat_id"] as? String)
            let chat = try await client.call(.get, "/api/v1/chats/\(chatID)", as: learner)
            #expect(chat.json["message_count"] as? Int == 1 && chat.json["title"] as? String == "細胞の質問" && chat.json["topic_id"] as? String == "biology.cells")
            let sent = try #require(llm.received.withLockedValue { $0.first })
            #expect(sent.messages.first?.role == "system" && sent.messages.first?.content.contains("細胞") == true)
            #expect(sent.messages.first?.content.contains("難易度: 2 / 5") == true)

            let answered = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"chat_id":"\#(chatID)","message":"物質の出入りを調節します"}"#)
            #expect(answered.status == .ok)
            let followUp = try #require(llm.received.withLockedValue { $0.last })
            #expect(followUp.messages.map(\.role) == ["system", "assistant", "user"])

            for (body, field) in [
                (#"{"mode":"question","subject_id":"biology","message":"x"}"#, "message"), (#"{"mode":"question"}"#, "subject_id"),
                (#"{"mode":"question","subject_id":"biology","chat_id":"\#(chatID)"}"#, "chat_id"), (#"{"mode":"turn"}"#, "message"),
                (#"{"mode":"question","subject_id":"biology","difficulty":9}"#, "difficulty"), (#"{"message":"x","difficulty":2}"#, "difficulty"),
            ] {
                let refused = try await client.call(.post, "/api/v1/chat", as: learner, json: body)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(body): \(refused.text)")
                #expect((refused.json["message"] as? String)?.contains(field) == true, "\(body): \(refused.text)")
            }
            #expect(llm.received.withLockedValue { $0.count } == 2)
        }
    }

    /// Runs the tag extraction jobs of the test's database with a worker of their own until `done` holds.
    func extractTags(llmBase: String, llm: LocalLLM, until done: @escaping @Sendable () async throws -> Bool) async throws -> Bool {
        let client = PostgresClient(configuration: database.clientConfiguration(poolSize: 4))
        let store = Database(client: client, timeout: .seconds(10))
        let extraction = TagExtraction(
            database: store,
            llm: try LLMClient(configuration: .init(api: .openai, baseURL: "\(llmBase)/v1", apiKey: llm.apiKey, model: llm.model), extraCAFile: nil),
            logger: TestEnvironment.quietLogger)
        var configuration = JobRuntimeConfiguration(concurrency: 2, pollInterval: .milliseconds(100), lease: .seconds(30), drain: .seconds(2))
        configuration.backoff = Backoff(base: .milliseconds(20), cap: .milliseconds(200))
        let worker = JobWorker(
            database: store, databaseURL: database, handlers: [extraction.handler], periodic: [], configuration: configuration,
            logger: TestEnvironment.quietLogger, started: nil)
        return try await Commands.withDatabase(client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                let reached = try await eventually(within: .seconds(20), done)
                worker.stop()
                try await group.waitForAll()
                return reached
            }
        }
    }

    @Test("misconception tags: after a turn a job asks for the subject's tags as structured output; findings above 0.5 tag the chat, unknown codes are dropped")
    func misconceptionTags() async throws {
        let llm = LocalLLM { request, _ in
            guard request.responseFormat != nil else { return .reply(["植物は夜も呼吸するの？"]) }
            return .reply([
                #"{"misconceptions":[{"code":"biology.plants_no_respiration","confidence":0.9},"#,
                #"{"code":"biology.made_up","confidence":0.95},{"code":"biology.gene_allele_confusion","confidence":0.2}]}"#,
            ])
        }
        try await withTurns(llm) { client, learner, base in
            let turn = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"植物は光合成だけをして、呼吸はしません。","topic_id":"biology.cells"}"#)
            let chatID = try #require(turn.json["chat_id"] as? String)
            #expect(try await count("SELECT count(*)::int8 FROM jobs WHERE kind = 'tags.extract' AND user_id = \(learner.id)") == 1)
            let tagged = try await extractTags(llmBase: base, llm: llm) {
                try await count("SELECT count(*)::int8 FROM jobs WHERE kind = 'tags.extract' AND state = 'completed' AND user_id = \(learner.id)") == 1
            }
            #expect(tagged)
            let tags = try await client.call(.get, "/api/v1/chats/\(chatID)/tags", as: learner)
            #expect((tags.json["items"] as? [[String: Any]])?.compactMap { $0["code"] as? String } == ["biology.plants_no_respiration"], "\(tags.text)")
            let asked = try #require(llm.received.withLockedValue { $0.first { $0.responseFormat != nil } })
            let format = try #require(asked.responseFormat)
            #expect(format.contains("biology.plants_no_respiration") && !format.contains("math.sign_error"))
            #expect(asked.messages.last?.content.contains("呼吸はしません") == true)
        }
    }

    @Test("misconception tags: an output that is not the schema's JSON is retried, then dead-lettered; the turn stays stored")
    func malformedTags() async throws {
        let llm = LocalLLM { request, _ in request.responseFormat == nil ? .reply(["なぜ？"]) : .reply(["タグはありません"]) }
        try await withTurns(llm) { client, learner, base in
            _ = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"力がなければ物は止まります。","subject_id":"physics"}"#)
            let dead = try await extractTags(llmBase: base, llm: llm) {
                try await count("SELECT count(*)::int8 FROM jobs WHERE kind = 'tags.extract' AND state = 'dead' AND user_id = \(learner.id)") == 1
            }
            #expect(dead)
            let job = try await rows("SELECT attempt::text, last_error FROM jobs WHERE kind = 'tags.extract' AND user_id = \(learner.id)")
            #expect(job.first?.first == "5" && job.first?.last??.contains("structured output") == true, "\(job)")
            #expect(try await count("SELECT count(*)::int8 FROM messages WHERE user_id = \(learner.id)") == 2)
            #expect(try await count("SELECT count(*)::int8 FROM chat_tags WHERE user_id = \(learner.id)") == 0)
        }
    }

    @Test("titles: at most 40 characters, cut at a space in the second half, whitespace folded")
    func titles() {
        #expect(TutoringPrompt.title(from: "  Newton's   first\nlaw  ") == "Newton's first law")
        #expect(TutoringPrompt.title(from: String(repeating: "あ", count: 50)) == String(repeating: "あ", count: 40))
        #expect(TutoringPrompt.title(from: "Plants make their food from sunlight through photosynthesis in leaves") == "Plants make their food from sunlight")
    }

    @Test("the history sent is the newest that fits the budget, oldest first")
    func historyBudget() {
        let history = (1...6).map { LLMMessage(role: $0 % 2 == 1 ? .user : .assistant, content: String(repeating: "\($0)", count: 10)) }
        let prompt = TutoringPrompt.messages(.init(subject: nil, topic: nil, difficulty: 3), history: history, message: "new", budget: 30)
        #expect(prompt.map(\.content).dropFirst() == ["5555555555", "6666666666", "new"])
    }
}
