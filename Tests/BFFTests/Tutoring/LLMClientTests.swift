import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The Chat Completions client against a local server that speaks both dialects and checks what it
/// receives (StandIns.LocalLLM): replies streamed piece by piece, usage, and every failure a provider
/// really sends mapped to one `LLMFailure`.
@Suite("LLM client", .timeLimit(.minutes(2)))
struct LLMClientTests {
    static let prompt = [
        LLMMessage(role: .system, content: "あなたは好奇心旺盛な生徒です。"),
        LLMMessage(role: .user, content: "光合成は光のエネルギーで糖を作ることです。"),
    ]

    func withLLM<T: Sendable>(
        _ api: LLMConfiguration.API = .openai, firstTokenTimeout: Duration = .seconds(5), totalTimeout: Duration = .seconds(10),
        answering answer: LLMAnswer, _ body: @escaping @Sendable (LLMClient, LocalLLM) async throws -> T
    ) async throws -> T {
        let llm = LocalLLM(answer: { _, _ in answer })
        return try await serveHTTP1(llm.router, logger: TestEnvironment.quietLogger) { base in
            let configuration = LLMConfiguration(
                api: api, baseURL: api == .openai ? "\(base)/v1" : base, apiKey: llm.apiKey, model: llm.model,
                firstTokenTimeout: firstTokenTimeout, totalTimeout: totalTimeout, maxOutputTokens: 300)
            let client = try LLMClient(configuration: configuration, extraCAFile: nil)
            return try await body(client, llm)
        }
    }

    @Test(
        "OpenAI dialect: the reply streams piece by piece with usage; the request has the model, max_completion_tokens, include_usage and nothing but the prompt",
        arguments: [LLMConfiguration.API.openai, .azure])
    func streamsAReply(api: LLMConfiguration.API) async throws {
        try await withLLM(api, answering: .reply(["なぜ", "光が", "必要なの？"])) { client, llm in
            let pieces = NIOLockedValueBox<[String]>([])
            let completion = try await client.complete(LLMRequest(messages: Self.prompt)) { piece in pieces.withLockedValue { $0.append(piece) } }
            #expect(pieces.withLockedValue { $0 } == ["なぜ", "光が", "必要なの？"])
            #expect(completion == LLMCompletion(text: "なぜ光が必要なの？", promptTokens: 42, completionTokens: 3, model: llm.model))
            let received = try #require(llm.received.withLockedValue { $0.first })
            #expect(received.dialect == api.rawValue && received.stream)
            #expect(received.messages.map(\.role) == ["system", "user"] && received.messages.map(\.content) == Self.prompt.map(\.content))
            let body = try #require(try JSONSerialization.jsonObject(with: Data(received.body.utf8)) as? [String: Any])
            #expect(
                Set(body.keys) == (api == .openai ? ["model", "messages", "max_completion_tokens", "stream", "stream_options"] : ["messages", "max_completion_tokens", "stream", "stream_options"]))
            #expect(body["max_completion_tokens"] as? Int == 300)
            #expect(llm.violations.withLockedValue { $0 }.isEmpty)
        }
    }

    @Test("the first piece reaches the caller while the upstream is still sending")
    func firstPieceBeforeTheEnd() async throws {
        try await withLLM(answering: .reply(["一", "二", "三", "四", "五"], interval: .milliseconds(150))) { client, _ in
            let firstAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
            _ = try await client.complete(LLMRequest(messages: Self.prompt)) { _ in
                firstAt.withLockedValue { if $0 == nil { $0 = .now } }
            }
            let ended = ContinuousClock.now
            let first = try #require(firstAt.withLockedValue { $0 })
            // Four more pieces 150 ms apart followed the first.
            #expect(ended - first >= .milliseconds(500), "the first piece came only \(ended - first) before the end")
        }
    }

    @Test(
        "each failure a provider sends maps to one outcome",
        arguments: [
            (LLMAnswer.status(429, code: "429", message: "Rate limit", headers: ["retry-after-ms": "1500", "retry-after": "2"]), "unavailable after 1.5 seconds"),
            (.status(429, code: "rate_limit_exceeded", message: "Slow down", headers: ["retry-after": "7"]), "unavailable after 7.0 seconds"),
            (.status(500, code: "server_error", message: "The server had an error"), "unavailable"),
            (.status(503, code: "overloaded", message: "Overloaded"), "unavailable"),
            (.status(400, code: "content_filter", message: "The response was filtered"), "content filtered"),
            (.status(401, code: "invalid_api_key", message: "Incorrect API key"), "misconfigured"),
            (.status(404, code: "DeploymentNotFound", message: "No deployment"), "misconfigured"),
            (.reply(["それは"], finishReason: "content_filter"), "content filtered"),
            (.reply(["それは"], finishReason: "tool_calls"), "unavailable"),
            (.truncated(["それは", "なぜ"]), "unavailable"),
            (.dropped(["それは"]), "unavailable"),
            (.streamError(["それは"], message: "The server had an error while processing your request."), "unavailable"),
            (.garbage, "unavailable"),
            (.reply([]), "unavailable"),
        ])
    func failures(answer: LLMAnswer, expected: String) async throws {
        for api in [LLMConfiguration.API.openai, .azure] {
            try await withLLM(api, answering: answer) { client, _ in
                let outcome: String
                do {
                    _ = try await client.complete(LLMRequest(messages: Self.prompt))
                    outcome = "a reply"
                } catch let failure as LLMFailure {
                    outcome = failure.summary
                }
                #expect(outcome == expected, "\(api)")
            }
        }
    }

    @Test("no first piece within the first-token timeout, or no end within the total: unavailable at that time, not later")
    func timeouts() async throws {
        try await withLLM(firstTokenTimeout: .seconds(1), answering: .stall(.seconds(4), then: ["遅い"])) { client, _ in
            let start = ContinuousClock.now
            await #expect(throws: LLMFailure.self) { _ = try await client.complete(LLMRequest(messages: Self.prompt)) }
            #expect(ContinuousClock.now - start < .seconds(2.5))
        }
        try await withLLM(firstTokenTimeout: .seconds(1), totalTimeout: .seconds(2), answering: .reply(Array(repeating: "あ", count: 20), interval: .milliseconds(300))) { client, _ in
            let start = ContinuousClock.now
            let pieces = NIOLockedValueBox(0)
            await #expect(throws: LLMFailure.self) {
                _ = try await client.complete(LLMRequest(messages: Self.prompt)) { _ in pieces.withLockedValue { $0 += 1 } }
            }
            #expect(ContinuousClock.now - start < .seconds(3.5))
            #expect(pieces.withLockedValue { $0 } > 0, "pieces before the total timeout reached the caller")
        }
    }

    @Test("a structured-output request carries its JSON schema as a strict json_schema response format")
    func structuredOutput() async throws {
        try await withLLM(answering: .reply([#"{"tags":[]}"#])) { client, llm in
            let schema = #"{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}},"required":["tags"],"additionalProperties":false}"#
            let completion = try await client.complete(LLMRequest(messages: Self.prompt, jsonSchema: (name: "misconceptions", schema: schema)))
            #expect(completion.text == #"{"tags":[]}"#)
            let format = try #require(llm.received.withLockedValue { $0.first?.responseFormat })
            #expect(format.contains(#""name":"misconceptions""#) && format.contains(#""strict":true"#) && format.contains(#""additionalProperties":false"#))
        }
    }

    @Test("server-sent events: CRLF and CR line ends, data split across reads, several data lines, comments and other fields")
    func serverSentEvents() throws {
        var events = ServerSentEvents()
        var seen: [String] = []
        for piece in [": keep-alive\r\n\r\nda", "ta: {\"a\":1}\r\n", "\r\ndata:x\ndata: y\n\nevent: ping\ndatabase: no\n\r", "data: [DONE]\r\r"] {
            seen += try events.feed(ByteBuffer(string: piece))
        }
        #expect(seen == [#"{"a":1}"#, "x\ny", "[DONE]"])
        var endless = ServerSentEvents()
        #expect(throws: ServerSentEvents.TooLarge.self) { _ = try endless.feed(ByteBuffer(string: "data: " + String(repeating: "a", count: 1 << 20 + 10))) }
    }

    @Test("Retry-After: retry-after-ms first, then seconds or an HTTP date")
    func retryAfter() {
        #expect(RetryAfter.parse(["retry-after-ms": "250", "retry-after": "9"]) == .milliseconds(250))
        #expect(RetryAfter.parse(["retry-after": "9"]) == .seconds(9))
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryAfter.parse(["retry-after": "Tue, 14 Nov 2023 22:13:40 GMT"], now: now) == .seconds(20))
        #expect(RetryAfter.parse(["retry-after": "soon"]) == nil && RetryAfter.parse([:]) == nil)
    }

    @Test("configuration: azure needs a key, the base URL is https (http for localhost only), the endpoint per dialect")
    func configuration() throws {
        func parse(_ env: [String: String]) throws -> LLMConfiguration? { try LLMConfiguration(EnvironmentReader(env)) }
        #expect(try parse([:]) == nil)
        let azure = try #require(
            try parse(["BFF_LLM_API": "azure", "BFF_LLM_BASE_URL": "https://learnapp.openai.azure.com/", "BFF_LLM_API_KEY": "k", "BFF_LLM_MODEL": "gpt-4o-mini"]))
        #expect(azure.endpoint == "https://learnapp.openai.azure.com/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21")
        let openai = try #require(try parse(["BFF_LLM_BASE_URL": "http://localhost:11434/v1", "BFF_LLM_MODEL": "llama3.1"]))
        #expect(openai.endpoint == "http://localhost:11434/v1/chat/completions" && openai.apiKey == nil)
        for (env, variable) in [
            (["BFF_LLM_API": "azure", "BFF_LLM_BASE_URL": "https://x.openai.azure.com", "BFF_LLM_MODEL": "m"], "BFF_LLM_API_KEY"),
            (["BFF_LLM_BASE_URL": "http://llm.example.com/v1", "BFF_LLM_MODEL": "m"], "BFF_LLM_BASE_URL"),
            (["BFF_LLM_BASE_URL": "https://api.openai.com/v1"], "BFF_LLM_MODEL"),
            (["BFF_LLM_API": "anthropic", "BFF_LLM_BASE_URL": "https://api.openai.com/v1", "BFF_LLM_MODEL": "m"], "BFF_LLM_API"),
            (["BFF_LLM_BASE_URL": "https://api.openai.com/v1", "BFF_LLM_MODEL": "m", "BFF_LLM_TIMEOUT": "30", "BFF_LLM_TOTAL_TIMEOUT": "10"], "BFF_LLM_TOTAL_TIMEOUT"),
        ] {
            #expect(throws: ConfigurationError.self, "\(variable)") { _ = try parse(env) }
            do { _ = try parse(env) } catch let error as ConfigurationError { #expect(error.variable == variable) }
        }
    }
}

extension LLMFailure {
    /// The outcome's kind, with a wait the provider asked for, for the tests' tables.
    var summary: String {
        switch self {
        case .unavailable(_, let after?): "unavailable after \(Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18) seconds"
        case .unavailable: "unavailable"
        case .contentFiltered: "content filtered"
        case .misconfigured: "misconfigured"
        }
    }
}
