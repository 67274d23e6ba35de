import BFFAPI
import BFFPlatform
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// One tutoring turn (API-030): the learner's message to the LLM in the role reversal's prompt, and
/// the message with its reply stored together, or nothing.
///
/// The LLM call takes seconds, so no transaction spans it. Before it, one read (`TurnStore.snapshot`)
/// and one statement that counts the turn and claims its `Idempotency-Key` (in progress: status NULL);
/// after it, one statement stores the turn's messages and the key's answer together; a failed call gives the key back, so the app's
/// re-send with the same key asks again. A key left in progress by a process that died is free once
/// the longest a call may take has passed.
struct ChatTurn: Sendable {
    let turns: TurnStore
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
        /// What a new chat's title and the stream's error are written in: the caller's language as
        /// the turn's read resolved it.
        var language: Language = .default
        /// The turn counted against the plan's day; nil for a replay or an unlimited plan.
        fileprivate var reservation: TurnQuota.Reservation? = nil
    }

    func run(userID: UUID, request: Request, idempotencyKey: String?, language: Language? = nil) async throws -> Result {
        try await complete(try await prepare(userID: userID, request: request, idempotencyKey: idempotencyKey, language: language))
    }

    /// `language` is the caller's when known, for what the server writes into a new chat (its title,
    /// the catalogue's names in the prompt); nil reads the learner's setting in the turn's read. It
    /// is not part of the request, so a retry in another language replays the first answer.
    func prepare(userID: UUID, request: Request, idempotencyKey: String?, language: Language? = nil) async throws -> Prepared {
        switch request.mode {
        case .turn:
            guard let message = request.message else { throw TurnRefusal.invalid(field: "message", problem: .requiredForTurn) }
            guard !message.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw TurnRefusal.invalid(field: "message", problem: .mustNotBeBlank) }
            // The contract's maxLength and pattern, which the generated decoder does not check: PostgreSQL
            // refuses NUL in text, and the turn would fail after the LLM call.
            guard message.unicodeScalars.count <= 8000 else { throw TurnRefusal.invalid(field: "message", problem: .atMostCharacters(8000)) }
            guard !message.unicodeScalars.contains("\0") else { throw TurnRefusal.invalid(field: "message", problem: .noNULCharacters) }
            guard request.difficulty == nil else { throw TurnRefusal.invalid(field: "difficulty", problem: .questionOnly) }
        case .question:
            guard request.message == nil else { throw TurnRefusal.invalid(field: "message", problem: .leftOutWithQuestionAIAsks) }
            guard request.chatID == nil else { throw TurnRefusal.invalid(field: "chat_id", problem: .leftOutWithQuestionStartsChat) }
            guard request.subjectID != nil else { throw TurnRefusal.invalid(field: "subject_id", problem: .requiredWithQuestion) }
        }
        if let difficulty = request.difficulty, !(1...5).contains(difficulty) {
            throw TurnRefusal.invalid(field: "difficulty", problem: .between(1, 5))
        }
        try IdempotencyRequest.check(idempotencyKey)
        let requestHash = try IdempotencyRequest.hash(request)
        // One read of all the turn decides on, then refusals that count nothing, then one statement
        // that counts the turn (quota, rate limit) and claims its key.
        let snapshot = try await turns.snapshot(userID: userID, request: request, operation: Self.operation, key: idempotencyKey, language: language)
        // A replay answers before anything is counted or asked; a key whose first request still runs
        // is decided by the claim below (it may have died).
        if let stored = snapshot.key {
            guard stored.hash == requestHash else { throw IdempotencyError.keyReused }
            if let body = stored.body, let earlier = try? JSONDecoder().decode(Result.self, from: body) {
                return Prepared(
                    replay: earlier, userID: userID, request: request, idempotencyKey: idempotencyKey, context: nil, language: snapshot.language)
            }
        }
        guard let llm else { throw TurnRefusal.tutorNotConfigured(retryAfterSeconds: Self.misconfiguredRetryAfter) }
        let plan = quota.plan(snapshot.entitlement)
        let allowed = try quota.allowance(plan: plan, question: request.mode == .question)
        let context = try Self.context(of: request, snapshot)
        let admission = try await turns.admit(
            .init(
                userID: userID, allowed: allowed, defaultZone: LearnerSettings.defaults.timezone,
                rateKey: "chat:user:\(userID.uuidString.lowercased())", rate: Self.rate, period: Self.period, operation: Self.operation,
                key: idempotencyKey, requestHash: requestHash, keyStale: llm.configuration.totalTimeout + .seconds(30)))
        switch admission {
        case .admitted(let day):
            return Prepared(
                replay: nil, userID: userID, request: request, idempotencyKey: idempotencyKey, context: context, language: snapshot.language,
                reservation: day.map { TurnQuota.Reservation(userID: userID, day: $0) })
        case .quotaExhausted(let secondsLeft): throw PlanRefusal.quotaExhausted(plan: plan, allowed: allowed ?? 0, secondsLeft: secondsLeft)
        case .rateLimited(let decision): throw TurnRefusal.rateLimited(decision)
        case .keyBusy: throw IdempotencyError.inProgress
        }
    }

    /// What the prompt needs, from the turn's read: 404 for a chat the learner does not have, 409 for
    /// an ended one (an opened recall reopens it for the re-recall conversation, UC-002), 422 for a
    /// new chat's unknown subject or topic.
    private static func context(of request: Request, _ snapshot: TurnStore.Snapshot) throws -> Context {
        let prompt = TutoringPrompt.Context(
            subject: snapshot.subjectName, topic: snapshot.topicName, difficulty: request.difficulty ?? snapshot.difficulty ?? 3)
        guard request.chatID != nil else {
            let (subjectID, topicID) = try CatalogueStore.resolve(
                subjectID: request.subjectID, topicID: request.topicID, subjectExists: snapshot.subjectExists, topicSubject: snapshot.topicSubject)
            return Context(prompt: prompt, history: [], newChat: (subjectID, topicID))
        }
        guard let chat = snapshot.chat else { throw TurnRefusal.chatNotFound }
        guard chat.status != "ended" || chat.reopened else { throw TurnRefusal.chatEnded }
        return Context(prompt: prompt, history: snapshot.history, newChat: nil)
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
    /// the learner), and stores the turn. Errors are the learner's answers (`TurnRefusal`); a failed call
    /// gives the key back, and the turn's reservation too unless a piece of the reply reached the
    /// learner: a client that leaves after the first delta has spent its turn.
    func complete(_ prepared: Prepared, onDelta: (@Sendable (String) async -> Void)? = nil) async throws -> Result {
        if let replay = prepared.replay { return replay }
        guard let llm, let context = prepared.context else { throw TurnRefusal.tutorUnavailable(retryAfterSeconds: Self.misconfiguredRetryAfter) }
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
            let result = try await store(
                userID: userID, request: request, context: context, completion: completion, idempotencyKey: idempotencyKey,
                language: prepared.language)
            logger.info(
                "tutoring turn",
                metadata: [
                    "chat_id": .string(result.chatID.uuidString.lowercased()), "model": .string(completion.model),
                    "prompt_tokens": .stringConvertible(completion.promptTokens), "completion_tokens": .stringConvertible(completion.completionTokens),
                ])
            return result
        } catch {
            if let key = idempotencyKey { try? await turns.release(.init(userID: userID, operation: Self.operation, key: key)) }
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

    /// The messages, the chat's counters, the tags' job and the key's answer, in one statement.
    private func store(
        userID: UUID, request: Request, context: Context, completion: LLMCompletion, idempotencyKey: String?, language: Language
    ) async throws -> Result {
        let title: String? =
            switch (context.newChat, request.mode) {
            case (nil, _): nil
            case (_, .turn): TutoringPrompt.title(from: request.message ?? "", language: language)
            case (_, .question): TutoringPrompt.questionTitle(context.prompt, language: language)
            }
        let stored = try await turns.store(
            .init(
                userID: userID, chatID: context.newChat == nil ? request.chatID : nil, title: title, subjectID: context.newChat?.subjectID,
                topicID: context.newChat?.topicID, message: request.message, completion: completion, operation: Self.operation,
                key: idempotencyKey))
        switch stored {
        case .stored(let result): return result
        // The chat ended, or was deleted, while the LLM answered.
        case .ended: throw TurnRefusal.chatEnded
        case .gone: throw TurnRefusal.chatNotFound
        }
    }

    /// The learner's answer to a failed turn: the LLM's failures and the drain as the turn's refusals.
    static func answer(for error: any Error, logger: Logger) -> any Error {
        if error is ShuttingDown {
            logger.notice("tutoring turn ended by the drain deadline; nothing stored")
            return TurnRefusal.shuttingDown
        }
        guard let failure = error as? LLMFailure else { return error }
        switch failure {
        case .unavailable(let reason, let retryAfter):
            logger.warning("LLM unavailable", metadata: ["reason": .string(reason)])
            return TurnRefusal.tutorUnavailable(retryAfterSeconds: Self.retryAfterSeconds(retryAfter))
        case .contentFiltered(let reason):
            logger.notice("LLM content filter", metadata: ["reason": .string(reason)])
            return TurnRefusal.contentFiltered
        case .misconfigured(let reason):
            logger.error("the LLM refused our configuration; check BFF_LLM_*", metadata: ["reason": .string(reason)])
            return TurnRefusal.tutorUnavailable(retryAfterSeconds: Self.misconfiguredRetryAfter)
        }
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
