import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// Whatever the LLM (or a proxy in front of it) sends, the turn is stored or 503 `llm_unavailable`
/// with `Retry-After`, and the process lives: every field of a streamed chunk with hostile values.
@Suite("Hostile LLM answers", .needsDatabase, .timeLimit(.minutes(3)))
struct LLMHostileAnswerTests {
    let turns: ChatTurnTests

    init() async throws {
        turns = try await ChatTurnTests()
    }

    enum Outcome: Sendable { case stored, unavailable }

    static let finish = #"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#
    static func content(_ value: String) -> String { #"{"choices":[{"index":0,"delta":{"content":\#(value)},"finish_reason":null}]}"# }
    static func usage(_ value: String) -> String { #"{"choices":[],"usage":\#(value)}"# }
    static let reply = content(#""どうして？""#)

    static let cases: [(name: String, events: [String], outcome: Outcome)] = [
        ("negative usage", [reply, finish, usage(#"{"prompt_tokens":-5,"completion_tokens":-1,"total_tokens":-6}"#), "[DONE]"], .stored),
        ("huge usage", [reply, finish, usage(#"{"prompt_tokens":9223372036854775807,"completion_tokens":1e300}"#), "[DONE]"], .stored),
        ("usage as strings", [reply, finish, usage(#"{"prompt_tokens":"12","completion_tokens":"3"}"#), "[DONE]"], .stored),
        ("usage null", [reply, finish, usage("null"), "[DONE]"], .stored),
        ("usage without counts", [reply, finish, usage("{}"), "[DONE]"], .stored),
        ("usage of another type", [reply, finish, usage("[1,2]"), "[DONE]"], .stored),
        ("a model name of 10,000 characters", [#"{"model":"\#(String(repeating: "m", count: 10_000))","choices":[]}"#, reply, finish, "[DONE]"], .stored),
        ("a model name that is a number", [#"{"model":42,"choices":[]}"#, reply, finish, "[DONE]"], .stored),
        ("a model name with control characters", [#"{"model":"gpt\u0000\u0007x","choices":[]}"#, reply, finish, "[DONE]"], .stored),
        ("content with NUL", [content(#""ど\u0000うして？""#), finish, "[DONE]"], .stored),
        ("content null, then text", [content("null"), reply, finish, "[DONE]"], .stored),
        ("content that is a number", [content("42"), finish, "[DONE]"], .unavailable),
        ("content that is an object", [content(#"{"text":"x"}"#), finish, "[DONE]"], .unavailable),
        ("a finish reason that is a number", [reply, #"{"choices":[{"index":0,"delta":{},"finish_reason":7}]}"#, "[DONE]"], .unavailable),
        ("an unknown finish reason", [reply, #"{"choices":[{"index":0,"delta":{},"finish_reason":"banana"}]}"#, "[DONE]"], .unavailable),
        ("choices that are an object", [#"{"choices":{"0":{}}}"#, finish, "[DONE]"], .unavailable),
        ("no finish reason", [reply, "[DONE]"], .unavailable),
        ("no content at all", [finish, "[DONE]"], .unavailable),
        ("a reply of 70,000 bytes", [content("\"" + String(repeating: "a", count: 70_000) + "\""), finish, "[DONE]"], .unavailable),
        ("an error that is a number", [#"{"error":5}"#, reply, finish, "[DONE]"], .unavailable),
    ]

    @Test("each hostile chunk: the turn is stored or 503 llm_unavailable with Retry-After, and the server answers on", arguments: cases.indices)
    func hostileChunk(_ index: Int) async throws {
        let (name, events, outcome) = Self.cases[index]
        let llm = LocalLLM { _, _ in .events(events) }
        try await turns.withTurns(llm) { client, learner in
            let response = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"植物は光合成をします。"}"#)
            switch outcome {
            case .stored:
                #expect(response.status == .ok, "\(name): \(response.text.prefix(300))")
                let reply = (response.json["reply"] as? [String: Any])?["content"] as? String
                #expect(reply?.contains("\u{0}") == false && reply?.isEmpty == false, "\(name)")
            case .unavailable:
                #expect(response.status == .serviceUnavailable && response.errorCode == "llm_unavailable", "\(name): \(response.text.prefix(300))")
                #expect(response.headers[.retryAfter] == "5", "\(name)")
            }
            // The model label is the configured model or "other", never the upstream's text.
            for line in scrapeMetrics().split(separator: "\n") where line.hasPrefix("bff_llm_tokens_total{") {
                #expect(line.contains("model=\"\(llm.model)\"") || line.contains("model=\"other\""), "\(line)")
            }
        }
    }

    @Test("503 llm_unavailable always carries Retry-After: the upstream's (within 1-300 s) or 5; inside a stream the error event carries retry_after")
    func retryAfter() async throws {
        let llm = LocalLLM { request, number in
            switch number {
            case 1: .status(500, code: "server_error", message: "boom")
            case 2: .status(429, code: "rate_limit_exceeded", message: "slow down", headers: ["retry-after": "7"])
            case 3: .status(503, code: "overloaded", message: "busy", headers: ["retry-after": "100000"])
            case 4: .garbage
            case 5: .dropped([])
            case 6: .dropped(["どうして"])
            default: .reply(["どうして？"])
            }
        }
        try await turns.withTurns(llm) { client, learner in
            let message = #"{"message":"植物は光合成をします。"}"#
            for expected in ["5", "7", "300", "5", "5"] {
                let response = try await client.call(.post, "/api/v1/chat", as: learner, json: message)
                #expect(response.status == .serviceUnavailable && response.errorCode == "llm_unavailable", "\(response.text)")
                #expect(response.headers[.retryAfter] == expected)
            }
            // Cut after the first delta: the stream already began, so the event says when to retry.
            // (Another learner: five turns in ten seconds are this one's limit.)
            let other = try await Learner.make(database: turns.database)
            let outcome = try await turns.stream(port: try #require(client.port), as: other, json: message)
            #expect(outcome.events.map(\.0) == ["delta", "error"], "\(outcome.events)")
            let error = try #require(try JSONSerialization.jsonObject(with: Data((outcome.events.last?.1 ?? "").utf8)) as? [String: Any])
            #expect(error["code"] as? String == "llm_unavailable" && error["retry_after"] as? Int == 5, "\(error)")
        }
        // Without an LLM configured the answer says when to look again too.
        let learner = try await Learner.make(database: turns.database)
        let app = try await makeTestApp(database: turns.database)
        try await app.live { client in
            let response = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"message":"x"}"#)
            #expect(response.status == .serviceUnavailable && response.headers[.retryAfter] == "60")
        }
    }
}
