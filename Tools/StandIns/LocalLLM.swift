import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import Logging
import NIOCore

/// How the local LLM answers one chat completion request.
public enum LLMAnswer: Sendable {
    /// A reply streamed as `chunks`: the first after `firstChunkAfter`, the rest `interval` apart,
    /// ending with `finishReason` (`content_filter` as Azure filters a reply mid-stream), a usage
    /// chunk and `[DONE]`.
    case reply(_ chunks: [String], firstChunkAfter: Duration = .zero, interval: Duration = .zero, finishReason: String = "stop")
    /// A status with an OpenAI-style error body and extra headers (`retry-after`, `retry-after-ms`).
    case status(Int, code: String, message: String, headers: [String: String] = [:])
    /// Chunks, then the stream ends without a finish reason or `[DONE]` (a truncated reply).
    case truncated(_ chunks: [String])
    /// Chunks, then the connection breaks off.
    case dropped(_ chunks: [String])
    /// Chunks, then an `error` object inside the 200 stream.
    case streamError(_ chunks: [String], message: String)
    /// A 200 event stream whose data is no JSON.
    case garbage
    /// Nothing for this long, then the reply (a client with a shorter timeout gives up first).
    case stall(Duration, then: [String])
    /// Each text as the data of one event, verbatim (`[DONE]` only when listed): a provider or a
    /// proxy that sends what no documentation allows.
    case events([String])
}

/// Breaks a response off mid-body: the client sees the connection reset.
struct StreamDropped: Error {}

/// An OpenAI-compatible Chat Completions server in both dialects the BFF speaks, checking what it
/// receives as the services do: OpenAI style (`POST /v1/chat/completions`, `Authorization: Bearer`,
/// the model in the body) and Azure OpenAI (`POST /openai/deployments/{deployment}/chat/completions
/// ?api-version=…`, an `api-key` header), `max_completion_tokens` (newer models refuse `max_tokens`)
/// and `stream_options.include_usage` on streams. Azure's streams start with a chunk without choices
/// that carries `prompt_filter_results`, and its chunks carry `content_filter_results`.
public final class LocalLLM: Sendable {
    public struct Received: Sendable {
        public let dialect: String
        public let body: String
        /// The request's JSON body's `messages`, as (role, content).
        public let messages: [(role: String, content: String)]
        public let stream: Bool
        public let responseFormat: String?
        /// The W3C `traceparent` the request carried (the services ignore it; a malformed one is a violation here).
        public let traceparent: String?
        /// The W3C `tracestate` it carried: the BFF never forwards one to a third party.
        public var tracestate: String? = nil
    }

    public let apiKey: String
    public let model: String
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    /// When each request's first content chunk was written (the benchmark sets the BFF's first byte against it).
    public let firstChunkSent = NIOLockedValueBox<[Date]>([])
    let answer: @Sendable (Received, Int) -> LLMAnswer
    /// Sees each streamed reply once it is sent: when its first and last content chunks went out.
    public let onStreamed: (@Sendable (_ request: Received, _ firstChunk: Date, _ lastChunk: Date) -> Void)?
    private let count = NIOLockedValueBox(0)

    /// `answer` decides each answer from the request and its number (1 for the first).
    public init(
        apiKey: String = "local-llm-key", model: String = "gpt-4o-mini",
        answer: @escaping @Sendable (_ request: Received, _ number: Int) -> LLMAnswer = { _, _ in .reply(["はい", "、", "なぜですか？"]) },
        onStreamed: (@Sendable (_ request: Received, _ firstChunk: Date, _ lastChunk: Date) -> Void)? = nil
    ) {
        self.apiKey = apiKey
        self.model = model
        self.onStreamed = onStreamed
        self.answer = answer
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/v1/chat/completions") { [self] request, _ -> Response in
            guard request.headers[.authorization] == "Bearer \(apiKey)" else {
                return error(401, code: "invalid_api_key", message: "Incorrect API key provided.")
            }
            return try await complete(request, dialect: "openai")
        }
        router.post("/openai/deployments/:deployment/chat/completions") { [self] request, context -> Response in
            guard HTTPField.Name("api-key").flatMap({ request.headers[$0] }) == apiKey else {
                return error(401, code: "401", message: "Access denied due to invalid subscription key or wrong API endpoint.")
            }
            guard context.parameters.get("deployment") == model else {
                return error(404, code: "DeploymentNotFound", message: "The API deployment for this resource does not exist.")
            }
            guard let version = request.uri.queryParameters["api-version"], !version.isEmpty else {
                return error(404, code: "404", message: "Resource not found")
            }
            return try await complete(request, dialect: "azure")
        }
        return router
    }

    /// W3C Trace Context's version 00: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, ids not all zero.
    static func isTraceparent(_ value: String) -> Bool {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        let hex = Set("0123456789abcdef")
        guard parts.count == 4, parts[0] == "00", parts[1].count == 32, parts[2].count == 16, parts[3].count == 2 else { return false }
        guard parts.dropFirst().allSatisfy({ $0.allSatisfy(hex.contains) }) else { return false }
        return parts[1].contains { $0 != "0" } && parts[2].contains { $0 != "0" }
    }

    private func error(_ status: Int, code: String, message: String, headers extra: [String: String] = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        for (name, value) in extra { if let name = HTTPField.Name(name) { headers[name] = value } }
        let body = #"{"error":{"message":"\#(message)","type":"invalid_request_error","param":null,"code":"\#(code)"}}"#
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    private func refuse(_ why: String) -> Response {
        violations.withLockedValue { $0.append(why) }
        return error(400, code: "invalid_request", message: why)
    }

    private func complete(_ request: Request, dialect: String) async throws -> Response {
        guard request.headers[.contentType]?.hasPrefix("application/json") == true else { return refuse("content type") }
        let body = String(buffer: try await request.body.collect(upTo: 4_000_000))
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return refuse("body is no JSON object") }
        guard let rawMessages = object["messages"] as? [[String: Any]], !rawMessages.isEmpty else { return refuse("messages") }
        var messages: [(role: String, content: String)] = []
        for message in rawMessages {
            guard let role = message["role"] as? String, ["system", "user", "assistant"].contains(role), let content = message["content"] as? String
            else { return refuse("a message without role and content") }
            messages.append((role, content))
        }
        if object["max_tokens"] != nil { return refuse("max_tokens is not supported with this model; use max_completion_tokens") }
        guard object["max_completion_tokens"] is Int else { return refuse("max_completion_tokens") }
        if dialect == "openai", object["model"] as? String != model { return refuse("model") }
        let stream = object["stream"] as? Bool ?? false
        if stream, (object["stream_options"] as? [String: Any])?["include_usage"] as? Bool != true { return refuse("stream_options.include_usage") }
        var responseFormat: String?
        if let format = object["response_format"] {
            guard let data = try? JSONSerialization.data(withJSONObject: format, options: [.sortedKeys]),
                (format as? [String: Any])?["type"] as? String == "json_schema"
            else { return refuse("response_format") }
            responseFormat = String(decoding: data, as: UTF8.self)
        }
        let traceparent = HTTPField.Name("traceparent").flatMap { request.headers[$0] }
        if let traceparent, !Self.isTraceparent(traceparent) { return refuse("traceparent \(traceparent)") }
        var receiving = Received(
            dialect: dialect, body: body, messages: messages, stream: stream, responseFormat: responseFormat, traceparent: traceparent)
        receiving.tracestate = HTTPField.Name("tracestate").flatMap { request.headers[$0] }
        let received = receiving
        self.received.withLockedValue { $0.append(received) }
        let number = count.withLockedValue { count in
            count += 1
            return count
        }
        var plan = answer(received, number)
        if case .stall(let duration, let chunks) = plan {
            try? await Task.sleep(for: duration)
            plan = .reply(chunks)
        }
        if case .status(let status, let code, let message, let headers) = plan {
            return error(status, code: code, message: message, headers: headers)
        }
        guard stream else { return whole(plan, dialect: dialect) }
        let chosen = plan
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: .init { [self] writer in
                try await self.stream(chosen, request: received, dialect: dialect, to: &writer)
                try await writer.finish(nil)
            })
    }

    private func chunk(_ content: String?, finish: String? = nil, dialect: String, filtered: Bool = false) -> String {
        var choice: [String: Any] = ["index": 0, "delta": content.map { ["content": $0] } ?? [:], "finish_reason": finish ?? NSNull()]
        if dialect == "azure" {
            choice["content_filter_results"] = ["hate": ["filtered": filtered, "severity": filtered ? "high" : "safe"]]
        }
        let object: [String: Any] = ["id": "chatcmpl-local", "object": "chat.completion.chunk", "model": model, "choices": [choice]]
        return "data: " + String(decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self) + "\n\n"
    }

    private func stream(_ plan: LLMAnswer, request: Received, dialect: String, to writer: inout some ResponseBodyWriter) async throws {
        func send(_ text: String) async throws { try await writer.write(ByteBuffer(string: text)) }
        if dialect == "azure" {
            try await send(#"data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}"# + "\n\n")
        }
        switch plan {
        case .reply(let chunks, let first, let interval, let finish):
            try await send(chunk(nil, dialect: dialect))  // the role chunk: no content yet
            var firstAt = Date()
            for (index, text) in chunks.enumerated() {
                try? await Task.sleep(for: index == 0 ? first : interval)
                if index == 0 {
                    firstAt = Date()
                    firstChunkSent.withLockedValue { $0.append(firstAt) }
                }
                try await send(chunk(text, dialect: dialect))
            }
            onStreamed?(request, firstAt, Date())
            try await send(chunk(nil, finish: finish, dialect: dialect, filtered: finish == "content_filter"))
            let usage = #"{"id":"chatcmpl-local","object":"chat.completion.chunk","model":"\#(model)","choices":[],"usage":{"prompt_tokens":42,"completion_tokens":\#(chunks.count),"total_tokens":\#(42 + chunks.count)}}"#
            try await send("data: \(usage)\n\n")
            try await send("data: [DONE]\n\n")
        case .truncated(let chunks):
            for text in chunks { try await send(chunk(text, dialect: dialect)) }
        case .dropped(let chunks):
            for text in chunks { try await send(chunk(text, dialect: dialect)) }
            throw StreamDropped()
        case .streamError(let chunks, let message):
            for text in chunks { try await send(chunk(text, dialect: dialect)) }
            try await send(#"data: {"error":{"message":"\#(message)","type":"server_error","code":null}}"# + "\n\n")
        case .garbage:
            try await send("data: <html>Bad Gateway</html>\n\n")
        case .events(let datas):
            for data in datas { try await send("data: \(data)\n\n") }
        case .status, .stall:
            break
        }
    }

    /// A non-streaming answer: one `chat.completion` object.
    private func whole(_ plan: LLMAnswer, dialect: String) -> Response {
        guard case .reply(let chunks, _, _, let finish) = plan else {
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "<html>")))
        }
        let message: [String: Any] = ["role": "assistant", "content": chunks.joined()]
        let object: [String: Any] = [
            "id": "chatcmpl-local", "object": "chat.completion", "model": model,
            "choices": [["index": 0, "message": message, "finish_reason": finish]],
            "usage": ["prompt_tokens": 42, "completion_tokens": chunks.count, "total_tokens": 42 + chunks.count],
        ]
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(data: try! JSONSerialization.data(withJSONObject: object))))
    }
}

