import BFFAPI
import BFFPlatform
import Foundation
import HTTPTypes
import OpenAPIRuntime

/// The generated server protocol's implementation. Handlers stay thin: each capability folder holds
/// the logic.
struct APIService: APIProtocol {
    let health: HealthHandlers
    let auth: AuthService
    let chats: ChatStore
    let chatCreation: ChatCreation
    let settings: SettingsStore
    let catalogue: CatalogueStore
    let pushTokens: PushTokenStore
    let recalls: RecallStore
    let turns: ChatTurn
    let subscriptions: SubscriptionStore
    let purchases: PurchaseVerification
    let inbox: RevenueCatInbox
    let accountDeletion: AccountDeletion
    let accountExport: AccountExport
    let remoteConfig: RemoteConfigSource
    let learnerLanguages: LearnerLanguages
    let achievements: AchievementStore
    let openAPIDocument: Data?

    /// References to what the composition root built; nothing is made here.
    init(dependencies: AppDependencies) {
        health = dependencies.health
        auth = dependencies.auth
        chats = dependencies.chats
        chatCreation = dependencies.chatCreation
        settings = dependencies.settings
        catalogue = dependencies.catalogue
        pushTokens = dependencies.pushTokens
        recalls = dependencies.recallStore
        subscriptions = dependencies.features.subscriptionSync.store
        turns = dependencies.turns
        purchases = dependencies.purchases
        inbox = dependencies.inbox
        accountDeletion = dependencies.accountDeletion
        accountExport = dependencies.accountExport
        remoteConfig = dependencies.remoteConfig
        learnerLanguages = dependencies.learnerLanguages
        achievements = dependencies.features.achievements
        openAPIDocument = dependencies.openAPIDocument
    }

    func getHealthz(_ input: Operations.GetHealthz.Input) async throws -> Operations.GetHealthz.Output {
        .ok(.init(body: .json(.init(status: .ok, version: BuildInfo.version))))
    }

    func getReadyz(_ input: Operations.GetReadyz.Input) async throws -> Operations.GetReadyz.Output {
        switch await health.readiness() {
        case .success(let version):
            return .ok(.init(body: .json(.init(status: .ready, schemaVersion: version))))
        case .failure(let error):
            let code = Components.Schemas._Error.CodePayload(value1: .init(rawValue: error.code.rawValue), value2: error.code.rawValue)
            return .serviceUnavailable(.init(body: .json(.init(code: code, message: error.message.text(in: await AppRequestContext.answerLanguage())))))
        }
    }

    func chatTurn(_ input: Operations.ChatTurn.Input) async throws -> Operations.ChatTurn.Output {
        let principal = try AppRequestContext.principal()
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let chatID = try body.chatId.map { text in
            guard let id = UUID(uuidString: text) else { throw APIError.validation("chat_id", .mustBeUUID) }
            return id
        }
        // The task-local context read once, and only the four values the turn needs kept: each read
        // copies the whole context, and what lives across the preparation's await stays in this
        // frame while the request waits for the database (scripts/bench chat, 1,000 streams opening).
        let (idempotencyKey, knownLanguage, pendingLanguage, streams) =
            AppRequestContext.current.map {
                ($0.idempotencyKey, $0.knownLanguage, $0.pendingLanguage, $0.acceptsEventStream)
            } ?? (nil, nil, nil, false)
        let prepared = try await turns.prepare(
            userID: principal.userID,
            request: .init(
                mode: body.mode == .question ? .question : .turn, chatID: chatID, message: body.message,
                subjectID: chatID == nil ? body.subjectId : nil, topicID: chatID == nil ? body.topicId : nil, difficulty: body.difficulty),
            idempotencyKey: idempotencyKey, language: knownLanguage)
        pendingLanguage?.learned(prepared.language)
        if streams {
            return .ok(.init(body: .textEventStream(TurnStream.body(turns, prepared, language: prepared.language, logger: turns.logger))))
        }
        return .ok(.init(body: .json(try await turns.complete(prepared).schema)))
    }
}

/// The turn's refusals as the contract words them, beside its handler.
extension TurnRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .invalid(let field, let problem): APIError.validation(field, problem)
        case .chatNotFound: APIError.notFound
        case .chatEnded: APIError(.chatEnded)
        case .rateLimited(let decision): APIError.rateLimited(decision)
        // 503 `llm_unavailable`, always with `Retry-After`: an app that gets none retries at once,
        // every learner together, into the outage.
        case .tutorUnavailable(let seconds): APIError(.llmUnavailable, headers: [.retryAfter: String(seconds)])
        case .tutorNotConfigured(let seconds):
            APIError(.llmUnavailable, .tutorNotConfigured, headers: [.retryAfter: String(seconds)])
        case .contentFiltered: APIError(.contentFiltered)
        case .shuttingDown:
            APIError(.notReady, .turnNotStoredShuttingDown, headers: [.retryAfter: "1"])
        }
    }
}
