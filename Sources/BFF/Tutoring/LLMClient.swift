import AsyncHTTPClient
import BFFPlatform
import Foundation
import Metrics
import NIOCore
import NIOHTTP1

/// One message of a chat completion's prompt.
struct LLMMessage: Sendable, Equatable {
    enum Role: String, Sendable { case system, user, assistant }
    let role: Role
    let content: String
}

/// A chat completion to ask for: the prompt and, for structured output, a JSON schema the reply must follow.
struct LLMRequest: Sendable {
    var messages: [LLMMessage]
    /// `{name, schema}` of a `json_schema` response format (strict), as JSON text.
    var jsonSchema: (name: String, schema: String)?
}

/// What a finished completion came to.
struct LLMCompletion: Sendable, Equatable {
    let text: String
    /// Tokens for cost accounting; zero when the provider sent no usage.
    let promptTokens: Int
    let completionTokens: Int
    let model: String
}

/// Why a completion failed, as the turn answers it.
enum LLMFailure: Error, Equatable, CustomStringConvertible {
    /// Unreachable, timed out, overloaded, or an answer that is no reply: 503 `llm_unavailable`.
    case unavailable(String, retryAfter: Duration?)
    /// The provider's content filter refused the prompt or the reply: 422 `content_filtered`.
    case contentFiltered(String)
    /// The provider refused our credentials, deployment or request: also 503 to the learner, but an
    /// operator must act (logged as an error).
    case misconfigured(String)

    var description: String {
        switch self {
        case .unavailable(let reason, _): "unavailable: \(reason)"
        case .contentFiltered(let reason): "content filtered: \(reason)"
        case .misconfigured(let reason): "misconfigured: \(reason)"
        }
    }
}

/// The Chat Completions API over async-http-client, always streamed (`stream: true` with usage), in
/// the dialect `LLMConfiguration.api` names. A reply counts only once the stream gave its finish
/// reason: a stream that ends without one, breaks off, or carries an `error` object is a failure.
struct LLMClient: Sendable {
    let configuration: LLMConfiguration
    let http: HTTPClient

    /// On the process's outbound client (`BFF_OUTBOUND_CA_FILE`), whose reads may pause as long as a whole reply may take.
    init(configuration: LLMConfiguration, extraCAFile: String?) throws {
        self.configuration = configuration
        self.http = try OutboundHTTP.client(extraCAFile: extraCAFile, readTimeout: configuration.totalTimeout)
    }

    /// Streams `request`'s reply, handing each piece of text to `onDelta` as it arrives, and returns
    /// the whole. Throws `LLMFailure` only; never waits longer than the total timeout, nor longer than
    /// the first-token timeout for the first text.
    func complete(_ request: LLMRequest, onDelta: @escaping @Sendable (String) async throws -> Void = { _ in }) async throws -> LLMCompletion {
        let started = ContinuousClock.now
        let firstText = FirstText()
        do {
            let completion = try await withThrowingTaskGroup(of: LLMCompletion?.self) { group in
                group.addTask {
                    try await self.stream(request) { text in
                        if await firstText.arrive() {
                            Metrics.Timer(label: "bff_llm_first_token_seconds").recordNanoseconds((ContinuousClock.now - started).nanoseconds)
                        }
                        try await onDelta(text)
                    }
                }
                group.addTask {
                    try await Task.sleep(until: started + configuration.firstTokenTimeout)
                    if await !firstText.arrived { throw LLMFailure.unavailable("no reply within \(configuration.firstTokenTimeout)", retryAfter: nil) }
                    try await Task.sleep(until: started + configuration.totalTimeout)
                    throw LLMFailure.unavailable("the reply took longer than \(configuration.totalTimeout)", retryAfter: nil)
                }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let result { return result }
                }
                throw LLMFailure.unavailable("the stream ended", retryAfter: nil)
            }
            Metrics.Timer(label: "bff_llm_total_seconds").recordNanoseconds((ContinuousClock.now - started).nanoseconds)
            Counter(label: "bff_llm_requests_total", dimensions: [("outcome", "ok")]).increment()
            let label = modelLabel(completion.model)
            Counter(label: "bff_llm_tokens_total", dimensions: [("model", label), ("kind", "prompt")]).increment(by: completion.promptTokens)
            Counter(label: "bff_llm_tokens_total", dimensions: [("model", label), ("kind", "completion")]).increment(by: completion.completionTokens)
            return completion
        } catch let failure as LLMFailure {
            Counter(label: "bff_llm_requests_total", dimensions: [("outcome", failure.kind)]).increment()
            throw failure
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // A connection refused or reset, TLS, a read timeout: the service is out of reach.
            let failure = LLMFailure.unavailable(LoggableError.describe(error), retryAfter: nil)
            Counter(label: "bff_llm_requests_total", dimensions: [("outcome", failure.kind)]).increment()
            throw failure
        }
    }

    /// The `model` label of the metrics: the configured model, for the upstream's name or a dated
    /// version of it, else "other". The upstream names the model in each answer; taken as it comes,
    /// every name a provider (or a hostile proxy) sends would be a new series.
    func modelLabel(_ model: String) -> String {
        model == configuration.model || model.hasPrefix(configuration.model + "-") ? configuration.model : "other"
    }

    /// The most of a reply the client keeps, in bytes: far above what `maxOutputTokens` allows an
    /// honest provider, low enough that a broken or hostile one cannot fill the server's memory.
    var maxReplyBytes: Int { max(64 * 1024, configuration.maxOutputTokens * 32) }

    private func stream(_ request: LLMRequest, onText: @escaping @Sendable (String) async throws -> Void) async throws -> LLMCompletion {
        var http = HTTPClientRequest(url: configuration.endpoint)
        http.method = .POST
        http.headers.add(name: "Content-Type", value: "application/json")
        http.headers.add(name: "Accept", value: "text/event-stream")
        switch configuration.api {
        case .azure: if let key = configuration.apiKey { http.headers.add(name: "api-key", value: key) }
        case .openai: if let key = configuration.apiKey { http.headers.add(name: "Authorization", value: "Bearer \(key)") }
        }
        http.body = .bytes(ByteBuffer(bytes: body(request)))
        let response = try await self.http.execute(http, deadline: .now() + .nanoseconds(configuration.totalTimeout.nanoseconds), span: "llm chat completion")
        guard response.status == .ok else {
            let text = String(buffer: (try? await response.body.collect(upTo: 65_536)) ?? ByteBuffer())
            throw Self.failure(status: Int(response.status.code), headers: response.headers, body: text)
        }
        var events = ServerSentEvents()
        var text = ""
        var finish: String?
        var usage: (prompt: Int, completion: Int)?
        var model = configuration.model
        let decoder = JSONDecoder()
        for try await buffer in response.body {
            let datas: [String]
            do { datas = try events.feed(buffer) } catch { throw LLMFailure.unavailable("an event of over 1 MiB", retryAfter: nil) }
            for data in datas {
                if data == "[DONE]" {
                    guard let finish else { throw LLMFailure.unavailable("the stream ended without a finish reason", retryAfter: nil) }
                    return try Self.finished(text: text, finish: finish, usage: usage, model: model)
                }
                guard let chunk = try? decoder.decode(StreamChunk.self, from: Data(data.utf8)) else {
                    throw LLMFailure.unavailable("a stream event that is no completion chunk", retryAfter: nil)
                }
                if let error = chunk.error {
                    throw LLMFailure.unavailable("an error inside the stream: \(error.message ?? error.code?.value ?? "no message")", retryAfter: nil)
                }
                if let name = chunk.model.flatMap(Self.storableModel) { model = name }
                if let counts = chunk.usage { usage = (counts.prompt, counts.completion) }
                for choice in chunk.choices ?? [] {
                    if choice.content_filter_results?.values.contains(where: { $0.filtered == true }) == true {
                        throw LLMFailure.contentFiltered("the reply was filtered")
                    }
                    // PostgreSQL's text refuses NUL: the reply could never be stored.
                    if let piece = choice.delta?.content?.replacingOccurrences(of: "\u{0}", with: ""), !piece.isEmpty {
                        text += piece
                        guard text.utf8.count <= maxReplyBytes else {
                            throw LLMFailure.unavailable("a reply of over \(maxReplyBytes) bytes", retryAfter: nil)
                        }
                        try await onText(piece)
                    }
                    if let reason = choice.finish_reason { finish = reason }
                }
            }
        }
        // Some servers end the stream after the finish reason without `[DONE]`.
        guard let finish else { throw LLMFailure.unavailable("the stream ended without a finish reason", retryAfter: nil) }
        return try Self.finished(text: text, finish: finish, usage: usage, model: model)
    }

    private static func finished(text: String, finish: String, usage: (prompt: Int, completion: Int)?, model: String) throws -> LLMCompletion {
        switch finish {
        case "content_filter": throw LLMFailure.contentFiltered("the reply was filtered")
        case "stop", "length": break
        default: throw LLMFailure.unavailable("the reply ended with \(finish)", retryAfter: nil)
        }
        guard !text.isEmpty else { throw LLMFailure.unavailable("an empty reply", retryAfter: nil) }
        return LLMCompletion(text: text, promptTokens: usage?.prompt ?? 0, completionTokens: usage?.completion ?? 0, model: model)
    }

    /// The upstream's model name as `messages.model` can hold it (≤ 200 characters, no control
    /// characters); nil when nothing usable is left.
    static func storableModel(_ name: String) -> String? {
        let scalars = name.unicodeScalars.filter { $0.properties.generalCategory != .control }.prefix(200)
        let cleaned = String(String.UnicodeScalarView(scalars))
        return cleaned.isEmpty ? nil : cleaned
    }

    /// The request body: only what the reply needs (no user id, name or email).
    private func body(_ request: LLMRequest) -> [UInt8] {
        var object: [String: Any] = [
            "messages": request.messages.map { ["role": $0.role.rawValue, "content": $0.content] },
            // Newer models refuse `max_tokens`.
            "max_completion_tokens": configuration.maxOutputTokens,
            "stream": true,
            "stream_options": ["include_usage": true],
        ]
        if configuration.api == .openai { object["model"] = configuration.model }
        if let schema = request.jsonSchema, let parsed = try? JSONSerialization.jsonObject(with: Data(schema.schema.utf8)) {
            object["response_format"] = ["type": "json_schema", "json_schema": ["name": schema.name, "strict": true, "schema": parsed]]
        }
        return Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8))
    }

    /// A refusal before the stream: content filter, rate limit, outage, or our own mistake.
    static func failure(status: Int, headers: HTTPHeaders, body: String) -> LLMFailure {
        let error = (try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(body.utf8)))?.error
        let code = error?.code?.value ?? ""
        let message = String((error?.message ?? "no error message").prefix(300))
        let described = "HTTP \(status)\(code.isEmpty ? "" : " \(code)"): \(message)"
        switch status {
        case 400 where code == "content_filter" || error?.innererror?.code == "ResponsibleAIPolicyViolation":
            return .contentFiltered(described)
        case 408, 409, 429, 500...599:
            return .unavailable(described, retryAfter: RetryAfter.parse(headers))
        default:
            return .misconfigured(described)
        }
    }
}

extension LLMFailure {
    /// The `outcome` dimension of `bff_llm_requests_total`.
    var kind: String {
        switch self {
        case .unavailable: "unavailable"
        case .contentFiltered: "content_filtered"
        case .misconfigured: "misconfigured"
        }
    }
}

/// Whether the reply's first text has come: the first-token timeout ends at it.
private actor FirstText {
    private(set) var arrived = false

    /// True the first time.
    func arrive() -> Bool {
        defer { arrived = true }
        return !arrived
    }
}

/// The parts of a `chat.completion.chunk` (and of an error inside the stream) the client reads.
private struct StreamChunk: Decodable {
    struct Choice: Decodable {
        struct Delta: Decodable { let content: String? }
        struct Filter: Decodable { let filtered: Bool? }
        let delta: Delta?
        let finish_reason: String?
        let content_filter_results: [String: Filter]?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            delta = try container.decodeIfPresent(Delta.self, forKey: .delta)
            finish_reason = try container.decodeIfPresent(String.self, forKey: .finish_reason)
            // Azure adds categories over time, some not shaped like the others: read what fits.
            content_filter_results = try? container.decodeIfPresent([String: Filter].self, forKey: .content_filter_results)
        }

        enum CodingKeys: String, CodingKey { case delta, finish_reason, content_filter_results }
    }

    /// Token counts for cost accounting, read leniently: a count that is missing, of another type,
    /// negative or beyond any real reply counts as zero (negative counts would stop the process in
    /// the metrics library, huge ones overflow the database's integer).
    struct Usage: Decodable {
        let prompt: Int
        let completion: Int

        static let plausible = 0...10_000_000

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func count(_ key: CodingKeys) -> Int {
                guard let value = try? container.decodeIfPresent(Int.self, forKey: key), Self.plausible.contains(value) else { return 0 }
                return value
            }
            prompt = count(.prompt_tokens)
            completion = count(.completion_tokens)
        }

        enum CodingKeys: String, CodingKey { case prompt_tokens, completion_tokens }
    }

    let choices: [Choice]?
    let usage: Usage?
    let model: String?
    let error: ErrorEnvelope.Body?

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        choices = try container.decodeIfPresent([Choice].self, forKey: .choices)
        // Informational fields: one of another type is ignored, not a failed turn.
        usage = try? container.decodeIfPresent(Usage.self, forKey: .usage)
        model = try? container.decodeIfPresent(String.self, forKey: .model)
        error = try container.decodeIfPresent(ErrorEnvelope.Body.self, forKey: .error)
    }

    enum CodingKeys: String, CodingKey { case choices, usage, model, error }
}

private struct ErrorEnvelope: Decodable {
    struct Body: Decodable {
        struct Inner: Decodable { let code: String? }
        let message: String?
        let code: LenientString?
        let innererror: Inner?
    }

    let error: Body?
}

/// A field some providers send as a string and others as a number.
private struct LenientString: Decodable {
    let value: String

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            value = text
        } else {
            value = String(try container.decode(Int.self))
        }
    }
}
