import BFFAPI
import BFFPlatform
import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// One tutoring turn (API-030): the learner's message to the LLM in the role reversal's prompt, and
/// the message with its reply stored together, or nothing.
///
/// The LLM call takes seconds, so no transaction spans it. With an `Idempotency-Key` the key is
/// claimed first in a transaction of its own (in progress: status NULL), and the turn's messages and
/// its stored answer commit together after the reply; a failed call gives the key back, so the app's
/// re-send with the same key asks again. A key left in progress by a process that died is free once
/// the longest a call may take has passed.
struct ChatTurn: Sendable {
    let database: Database
    let chats: ChatRepository
    let limiter: RateLimiter
    /// Nil without `BFF_LLM_BASE_URL`: every turn is 503 `llm_unavailable`.
    let llm: LLMClient?
    /// The plan's features and turns a day.
    let quota: TurnQuota
    /// When a draining server gives up waiting for the LLM (see `untilDrained`).
    let drain: DrainDeadline
    let logger: Logger

    static let operation = "chatTurn"
    /// API-030: 5 turns per 10 seconds per user.
    static let rate = 5
    static let period: Duration = .seconds(10)

    struct Request: Codable, Sendable {
        enum Mode: String, Codable, Sendable {
            /// The learner's message, answered.
            case turn
            /// The instant question (M-007): a new chat whose first message is the AI's question.
            case question
        }

        var mode: Mode = .turn
        let chatID: UUID?
        let message: String?
        let subjectID: String?
        let topicID: String?
        var difficulty: Int?
    }

    struct StoredMessage: Codable, Sendable, Equatable {
        let id: UUID
        let role: String
        let content: String
        let createdMicros: Int64
    }

    struct Result: Codable, Sendable, Equatable {
        let chatID: UUID
        /// Absent for an instant question.
        let userMessage: StoredMessage?
        let reply: StoredMessage
    }

    /// A turn decided on and ready to ask the LLM: every refusal (validation, replay, rate limit,
    /// ownership, the key) is behind it, so a stream may begin.
    struct Prepared: Sendable {
        /// The first turn's answer, for a re-send with its key: nothing is asked.
        let replay: Result?
        fileprivate let userID: UUID
        fileprivate let request: Request
        fileprivate let idempotencyKey: String?
        fileprivate let context: Context?
        /// The turn counted against the plan's day; nil for a replay or an unlimited plan.
        fileprivate var reservation: TurnQuota.Reservation? = nil
    }

    func run(userID: UUID, request: Request, idempotencyKey: String?) async throws -> Result {
        try await complete(try await prepare(userID: userID, request: request, idempotencyKey: idempotencyKey))
    }

    func prepare(userID: UUID, request: Request, idempotencyKey: String?) async throws -> Prepared {
        switch request.mode {
        case .turn:
            guard let message = request.message else { throw APIError.validation("message", "is required (mode turn)") }
            guard !message.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw APIError.validation("message", "must not be blank") }
            // The contract's maxLength and pattern, which the generated decoder does not check: PostgreSQL
            // refuses NUL in text, and the turn would fail after the LLM call.
            guard message.unicodeScalars.count <= 8000 else { throw APIError.validation("message", "must be at most 8000 characters") }
            guard !message.unicodeScalars.contains("\0") else { throw APIError.validation("message", "must not contain NUL characters") }
            guard request.difficulty == nil else { throw APIError.validation("difficulty", "is for mode question only") }
        case .question:
            guard request.message == nil else { throw APIError.validation("message", "must be left out with mode question: the AI asks") }
            guard request.chatID == nil else { throw APIError.validation("chat_id", "must be left out with mode question: it starts a chat") }
            guard request.subjectID != nil else { throw APIError.validation("subject_id", "is required with mode question") }
        }
        if let difficulty = request.difficulty, !(1...5).contains(difficulty) {
            throw APIError.validation("difficulty", "must be between 1 and 5")
        }
        try IdempotencyRequest.check(idempotencyKey)
        let requestHash = try IdempotencyRequest.hash(request)
        // A replay answers before anything is counted or asked.
        if let key = idempotencyKey, let earlier = try await stored(userID: userID, key: key, requestHash: requestHash) {
            return Prepared(replay: earlier, userID: userID, request: request, idempotencyKey: key, context: nil)
        }
        guard let llm else { throw Self.unavailable("The tutor is not configured on this server.", retryAfter: Self.misconfiguredRetryAfter) }
        // Counted before the LLM is asked; every refusal after this gives it back. The plan's
        // refusals come first and are not counted by the rate limit.
        let reservation = try await quota.reserve(userID: userID, question: request.mode == .question)
        do {
            let decision = try await limiter.limit(key: "chat:user:\(userID.uuidString.lowercased())", rate: Self.rate, per: Self.period)
            guard decision.allowed else { throw APIError.rateLimited(decision) }
            let context = try await readContext(userID: userID, request: request)
            if let key = idempotencyKey {
                try await claim(userID: userID, key: key, requestHash: requestHash, stale: llm.configuration.totalTimeout + .seconds(30))
            }
            return Prepared(
                replay: nil, userID: userID, request: request, idempotencyKey: idempotencyKey, context: context, reservation: reservation)
        } catch {
            await giveBack(reservation)
            throw error
        }
    }

    /// Gives a reserved turn back; a failure only costs the learner that turn, so it is logged.
    private func giveBack(_ reservation: TurnQuota.Reservation?) async {
        guard let reservation else { return }
        do {
            try await quota.giveBack(reservation)
        } catch {
            logger.warning("a turn that reached nobody was not given back to the day's quota", metadata: ["error": .string(LoggableError.describe(error))])
        }
    }

    /// Asks the LLM, handing each piece of the reply to `onDelta` (a streamed turn: each piece reaches
    /// the learner), and stores the turn. Errors are the learner's answers (`APIError`); a failed call
    /// gives the key back, and the turn's reservation too unless a piece of the reply reached the
    /// learner: a client that leaves after the first delta has spent its turn.
    func complete(_ prepared: Prepared, onDelta: (@Sendable (String) async -> Void)? = nil) async throws -> Result {
        if let replay = prepared.replay { return replay }
        guard let llm, let context = prepared.context else { throw Self.unavailable(retryAfter: Self.misconfiguredRetryAfter) }
        let (userID, request, idempotencyKey) = (prepared.userID, prepared.request, prepared.idempotencyKey)
        let delivered = DeliveredMark()
        do {
            let prompt =
                switch request.mode {
                case .turn:
                    TutoringPrompt.messages(context.prompt, history: context.history, message: request.message ?? "", budget: llm.configuration.historyBudget)
                case .question: TutoringPrompt.question(context.prompt)
                }
            let completion = try await untilDrained {
                try await llm.complete(LLMRequest(messages: prompt)) { text in
                    guard let onDelta else { return }
                    delivered.mark()
                    await onDelta(text)
                }
            }
            let result = try await store(userID: userID, request: request, context: context, completion: completion, idempotencyKey: idempotencyKey)
            logger.info(
                "tutoring turn",
                metadata: [
                    "chat_id": .string(result.chatID.uuidString.lowercased()), "model": .string(completion.model),
                    "prompt_tokens": .stringConvertible(completion.promptTokens), "completion_tokens": .stringConvertible(completion.completionTokens),
                ])
            return result
        } catch {
            if let key = idempotencyKey { try? await release(userID: userID, key: key) }
            if !delivered.isMarked { await giveBack(prepared.reservation) }
            throw Self.answer(for: error, logger: logger)
        }
    }

    /// Whether a piece of the reply has been handed to the learner's stream.
    private final class DeliveredMark: Sendable {
        private let marked = NIOLockedValueBox(false)
        func mark() { marked.withLockedValue { $0 = true } }
        var isMarked: Bool { marked.withLockedValue { $0 } }
    }

    /// The server stops waiting for the LLM at the drain deadline: a turn still running then would be
    /// cut off with its connection when the grace period ends. It fails instead, with nothing stored
    /// and its key given back, so the app's re-send (to another replica) asks again.
    private func untilDrained(_ call: @escaping @Sendable () async throws -> LLMCompletion) async throws -> LLMCompletion {
        try await withThrowingTaskGroup(of: LLMCompletion?.self) { group in
            group.addTask { try await call() }
            group.addTask {
                await drain.wait()
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let completion = first else { throw ShuttingDown() }
            return completion
        }
    }

    struct ShuttingDown: Error {}

    /// What the prompt needs, read before the call: the chat's state and history, or a new chat's catalogue entries.
    struct Context: Sendable {
        var prompt: TutoringPrompt.Context
        var history: [LLMMessage]
        /// A new chat's subject and topic ids; nil for an existing chat.
        var newChat: (subjectID: String?, topicID: String?)?
    }

    private func readContext(userID: UUID, request: Request) async throws -> Context {
        try await database.run { client in
            var difficulty = 3
            for try await value in try await client.query(
                "SELECT difficulty FROM user_settings WHERE user_id = \(userID)", logger: logger
            ).decode(Int16.self) { difficulty = Int(value) }
            difficulty = request.difficulty ?? difficulty
            guard let chatID = request.chatID else {
                let (subjectID, topicID) = try await client.withConnection { connection in
                    try await ChatCreation.catalogue(connection, subjectID: request.subjectID, topicID: request.topicID, logger: logger)
                }
                let names = try await Self.names(client, subjectID: subjectID, topicID: topicID, logger: logger)
                return Context(prompt: .init(subject: names.subject, topic: names.topic, difficulty: difficulty), history: [], newChat: (subjectID, topicID))
            }
            var found: (status: String, subjectID: String?, topicID: String?, reopened: Bool)?
            for try await row in try await client.query(
                """
                SELECT c.status, c.subject_id, c.topic_id,
                       EXISTS (SELECT 1 FROM recalls r WHERE r.chat_id = c.id AND r.user_id = c.user_id AND r.status = 'opened')
                FROM chats c WHERE c.id = \(chatID) AND c.user_id = \(userID) AND c.deleted_at IS NULL
                """, logger: logger
            ).decode((String, String?, String?, Bool).self) { found = (row.0, row.1, row.2, row.3) }
            guard let found else { throw APIError.notFound }
            // An opened recall reopens its ended chat for the re-recall conversation (UC-002).
            guard found.status != "ended" || found.reopened else { throw APIError(.chatEnded) }
            let history = try await Self.dialogue(client, chatID: chatID, userID: userID, logger: logger)
            let names = try await Self.names(client, subjectID: found.subjectID, topicID: found.topicID, logger: logger)
            return Context(prompt: .init(subject: names.subject, topic: names.topic, difficulty: difficulty), history: history, newChat: nil)
        }
    }

    /// The chat's newest 200 messages of the learner and the AI, oldest first: the history a turn
    /// sends and the dialogue tags are read from.
    static func dialogue(_ client: PostgresClient, chatID: UUID, userID: UUID, logger: Logger) async throws -> [LLMMessage] {
        var dialogue: [LLMMessage] = []
        for try await (role, content) in try await client.query(
            """
            SELECT role, content FROM (
                SELECT role, content, created_at, id FROM messages
                WHERE chat_id = \(chatID) AND user_id = \(userID) AND role IN ('user', 'assistant')
                ORDER BY created_at DESC, id DESC LIMIT 200
            ) newest ORDER BY created_at, id
            """, logger: logger
        ).decode((String, String).self) {
            dialogue.append(LLMMessage(role: role == "user" ? .user : .assistant, content: content))
        }
        return dialogue
    }

    private static func names(_ client: PostgresClient, subjectID: String?, topicID: String?, logger: Logger) async throws -> (subject: String?, topic: String?) {
        var names: (subject: String?, topic: String?) = (nil, nil)
        for try await (subject, topic) in try await client.query(
            "SELECT (SELECT name FROM subjects WHERE id = \(subjectID)), (SELECT name FROM topics WHERE id = \(topicID))", logger: logger
        ).decode((String?, String?).self) { names = (subject, topic) }
        return names
    }

    /// The messages, the chat's counters and the key's answer, in one transaction.
    private func store(userID: UUID, request: Request, context: Context, completion: LLMCompletion, idempotencyKey: String?) async throws -> Result {
        try await database.run { client in
            try await client.withTransaction(logger: logger) { connection in
                var chatID = request.chatID
                if let newChat = context.newChat {
                    let title =
                        switch request.mode {
                        case .turn: TutoringPrompt.title(from: request.message ?? "")
                        case .question: TutoringPrompt.questionTitle(context.prompt)
                        }
                    chatID = try await chats.create(
                        on: connection, userID: userID, title: title, subjectID: newChat.subjectID, topicID: newChat.topicID, logger: logger
                    ).id
                }
                guard let chatID else { throw APIError.notFound }
                var stored: [StoredMessage] = []
                for try await (id, role, content, micros) in try await connection.query(
                    """
                    WITH chat AS (
                        UPDATE chats SET message_count = message_count + \(request.message == nil ? 1 : 2),
                            last_message_preview = left(\(completion.text), 140), updated_at = bff_chat_stamp(\(userID))
                        WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL
                          AND (status <> 'ended' OR EXISTS (
                              SELECT 1 FROM recalls r WHERE r.chat_id = chats.id AND r.user_id = chats.user_id AND r.status = 'opened'))
                        RETURNING id, user_id
                    ), at AS (SELECT clock_timestamp() AS now)
                    INSERT INTO messages (chat_id, user_id, role, content, created_at, model, prompt_tokens, completion_tokens)
                    SELECT id, user_id, 'user', \(request.message), at.now, NULL, NULL, NULL FROM chat, at WHERE \(request.message)::text IS NOT NULL
                    UNION ALL
                    SELECT id, user_id, 'assistant', \(completion.text), at.now + interval '1 microsecond', \(completion.model),
                           \(completion.promptTokens), \(completion.completionTokens) FROM chat, at
                    RETURNING id, role, content, (extract(epoch FROM created_at) * 1000000)::int8
                    """, logger: logger
                ).decode((UUID, String, String, Int64).self) {
                    stored.append(StoredMessage(id: id, role: role, content: content, createdMicros: micros))
                }
                // The chat was deleted, or ended, while the LLM answered.
                let user = stored.first(where: { $0.role == "user" })
                guard let reply = stored.first(where: { $0.role == "assistant" }), (user == nil) == (request.message == nil) else {
                    throw try await Self.chatGone(chatID: chatID, userID: userID, on: connection, logger: logger)
                }
                let result = Result(chatID: chatID, userMessage: user, reply: reply)
                // Misconception tags from the dialogue, once this turn is committed (never part of it).
                if user != nil {
                    try await TagExtraction.enqueue(chatID: chatID, userID: userID, replyID: reply.id, on: connection, logger: logger)
                }
                if let key = idempotencyKey {
                    try await IdempotencyStore.answer(
                        .init(userID: userID, operation: Self.operation, key: key), status: 200, body: try JSONEncoder().encode(result),
                        on: connection, logger: logger)
                }
                return result
            }
        }
    }

    /// Why the turn's chat took no messages: 409 `chat_ended` when it ended while the LLM answered
    /// (the rule is checked again as the turn is stored), else 404 (deleted).
    private static func chatGone(chatID: UUID, userID: UUID, on connection: PostgresConnection, logger: Logger) async throws -> APIError {
        for try await _ in try await connection.query(
            "SELECT 1 FROM chats WHERE id = \(chatID) AND user_id = \(userID) AND deleted_at IS NULL AND status = 'ended'", logger: logger)
        {
            return APIError(.chatEnded)
        }
        return APIError.notFound
    }

    /// The first turn's answer for `key`; throws while it is still running or when the key came with another body.
    private func stored(userID: UUID, key: String, requestHash: Data) async throws -> Result? {
        try await idempotency { connection in
            guard let stored = try await IdempotencyStore.stored(.init(userID: userID, operation: Self.operation, key: key), requestHash: requestHash, on: connection, logger: logger),
                let body = stored
            else { return nil }
            return try? JSONDecoder().decode(Result.self, from: body)
        }
    }

    /// Takes `key` for this turn; a key already taken by a turn still running is 409.
    private func claim(userID: UUID, key: String, requestHash: Data, stale: Duration) async throws {
        let owned = try await idempotency { connection in
            try await IdempotencyStore.claim(
                .init(userID: userID, operation: Self.operation, key: key), requestHash: requestHash, staleAfter: stale, on: connection, logger: logger)
        }
        guard owned else { throw IdempotencyError.inProgress }
    }

    private func release(userID: UUID, key: String) async throws {
        try await idempotency { connection in
            try await IdempotencyStore.release(.init(userID: userID, operation: Self.operation, key: key), on: connection, logger: logger)
        }
    }

    private func idempotency<Value: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Value) async throws -> Value {
        try await database.run { client in try await client.withConnection { try await body($0) } }
    }

    /// The learner's answer to a failed turn: the LLM's failures as the contract names them.
    static func answer(for error: any Error, logger: Logger) -> any Error {
        if error is ShuttingDown {
            logger.notice("tutoring turn ended by the drain deadline; nothing stored")
            return APIError(
                .notReady, "This server is shutting down and did not store the turn; send it again.", headers: [.retryAfter: "1"])
        }
        guard let failure = error as? LLMFailure else { return error }
        switch failure {
        case .unavailable(let reason, let retryAfter):
            logger.warning("LLM unavailable", metadata: ["reason": .string(reason)])
            return unavailable(retryAfter: Self.retryAfterSeconds(retryAfter))
        case .contentFiltered(let reason):
            logger.notice("LLM content filter", metadata: ["reason": .string(reason)])
            return APIError(.contentFiltered)
        case .misconfigured(let reason):
            logger.error("the LLM refused our configuration; check BFF_LLM_*", metadata: ["reason": .string(reason)])
            return unavailable(retryAfter: Self.misconfiguredRetryAfter)
        }
    }

    /// 503 `llm_unavailable`, always with `Retry-After`: an app that gets none retries at once, every
    /// learner together, into the outage.
    static func unavailable(_ message: String? = nil, retryAfter seconds: Int) -> APIError {
        APIError(.llmUnavailable, message, headers: [.retryAfter: String(seconds)])
    }

    /// The upstream's `Retry-After`, in whole seconds within 1...300; 5 when it gave none.
    static func retryAfterSeconds(_ upstream: Duration?) -> Int {
        guard let upstream else { return defaultRetryAfter }
        return min(300, max(1, Int(upstream.seconds.rounded(.up))))
    }

    static let defaultRetryAfter = 5
    /// An operator must fix the configuration first: no point asking again within seconds.
    static let misconfiguredRetryAfter = 60
}

extension ChatTurn.StoredMessage {
    var schema: Components.Schemas.Message {
        .init(
            id: id.uuidString.lowercased(), role: Components.Schemas.Message.RolePayload(rawValue: role) ?? .system, content: content,
            createdAt: Date(micros: createdMicros))
    }
}
