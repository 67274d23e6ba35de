import BFFAPI
import BFFPlatform
import Foundation

/// Chats, history, evaluation and tags (API-020…022): decode, authorize, call the repository, encode.
extension APIService {
    private static func chatID(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: text) else { throw APIError.validation("chat_id", .mustBeUUID) }
        return id
    }

    /// Served by `ChatListRoute` in the running server (it writes the JSON itself); this generated
    /// form of the same page is the reference the route's output is tested against.
    func listChats(_ input: Operations.ListChats.Input) async throws -> Operations.ListChats.Output {
        let principal = try AppRequestContext.principal()
        let page = try await chats.page(
            userID: principal.userID, limit: input.query.limit, cursor: input.query.cursor, updatedSince: input.query.updatedSince)
        let items: [Components.Schemas.ChatListItem] = page.records.map { $0.deleted ? .ChatTombstone($0.tombstone) : .Chat($0.schema) }
        return .ok(.init(body: .json(.init(items: items, nextCursor: page.nextCursor))))
    }

    func createChat(_ input: Operations.CreateChat.Input) async throws -> Operations.CreateChat.Output {
        let principal = try AppRequestContext.principal()
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let outcome = try await chatCreation.create(
            userID: principal.userID,
            request: .init(title: body.title, subjectID: body.subjectId, topicID: body.topicId),
            idempotencyKey: AppRequestContext.current?.idempotencyKey,
            // Only an untitled chat gets a sentence of the server's: its default title.
            language: body.title == nil ? await AppRequestContext.answerLanguage() : .default)
        let chat: ChatRecord
        switch outcome {
        case .created(let created): chat = created
        case .replayed(let replayed): chat = replayed
        }
        return .created(.init(headers: .init(location: "/api/v1/chats/\(chat.id.uuidString.lowercased())"), body: .json(chat.schema)))
    }

    func getChat(_ input: Operations.GetChat.Input) async throws -> Operations.GetChat.Output {
        let principal = try AppRequestContext.principal()
        guard let chat = try await chats.find(userID: principal.userID, chatID: try Self.chatID(input.path.chatId)) else {
            throw APIError.notFound
        }
        return .ok(.init(body: .json(chat.schema)))
    }

    func renameChat(_ input: Operations.RenameChat.Input) async throws -> Operations.RenameChat.Output {
        let principal = try AppRequestContext.principal()
        let chatID = try Self.chatID(input.path.chatId)
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let title = try ChatCreation.title(body.title)
        switch try await chats.rename(userID: principal.userID, chatID: chatID, title: title, clientUpdatedAt: body.updatedAt) {
        case .renamed(let chat):
            return .ok(.init(body: .json(chat.schema)))
        case .stale:
            throw APIError(.staleUpdate, .chatChangedMeanwhile)
        case .missing:
            throw APIError.notFound
        }
    }

    func deleteChat(_ input: Operations.DeleteChat.Input) async throws -> Operations.DeleteChat.Output {
        let principal = try AppRequestContext.principal()
        guard try await chats.delete(userID: principal.userID, chatID: try Self.chatID(input.path.chatId)) else {
            throw APIError.notFound
        }
        return .noContent(.init())
    }

    func listMessages(_ input: Operations.ListMessages.Input) async throws -> Operations.ListMessages.Output {
        let principal = try AppRequestContext.principal()
        let chatID = try Self.chatID(input.path.chatId)
        let limit = try PageLimit.resolve(input.query.limit, default: 50, max: 1000)
        let filter = chatID.uuidString.lowercased()
        let cursor = try input.query.cursor.map { try KeysetCursor.decode($0, expecting: .messages, filter: filter) }
        guard let page = try await chats.messages(userID: principal.userID, chatID: chatID, limit: limit, after: cursor) else {
            throw APIError.notFound
        }
        let next =
            page.count > limit
            ? KeysetCursor(list: .messages, micros: page[limit - 1].createdMicros, id: page[limit - 1].id, filter: filter).encoded() : nil
        return .ok(.init(body: .json(.init(items: page.prefix(limit).map(\.schema), nextCursor: next))))
    }

    func evaluateChat(_ input: Operations.EvaluateChat.Input) async throws -> Operations.EvaluateChat.Output {
        let principal = try AppRequestContext.principal()
        let chatID = try Self.chatID(input.path.chatId)
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        guard (1...5).contains(body.score) else { throw APIError.validation("score", .between(1, 5)) }
        if let note = body.note, note.unicodeScalars.count > 1000 { throw APIError.validation("note", .atMostCharacters(1000)) }
        let language = await AppRequestContext.answerLanguage()
        guard let evaluation = try await chats.evaluate(userID: principal.userID, chatID: chatID, score: body.score, note: body.note, language: language)
        else {
            throw APIError.notFound
        }
        return .ok(
            .init(
                body: .json(
                    .init(
                        chatId: chatID.uuidString.lowercased(), score: evaluation.score, note: evaluation.note,
                        createdAt: evaluation.createdAt, tags: evaluation.tags.map(\.schema)))))
    }

    func listChatTags(_ input: Operations.ListChatTags.Input) async throws -> Operations.ListChatTags.Output {
        let principal = try AppRequestContext.principal()
        let chatID = try Self.chatID(input.path.chatId)
        guard let tags = try await chats.tags(userID: principal.userID, chatID: chatID, language: await AppRequestContext.answerLanguage()) else {
            throw APIError.notFound
        }
        return .ok(.init(body: .json(.init(items: tags.map(\.schema)))))
    }
}

// The chats' refusals as the contract words them; the recalls' list and the tutoring turn share the
// paging and the Idempotency-Key.

extension ChatError: DomainError {
    var apiError: APIError {
        switch self {
        case .invalid(let field, let problem): APIError.validation(field, problem)
        }
    }
}

extension IdempotencyError: DomainError {
    var apiError: APIError {
        switch self {
        case .malformedKey: APIError.validation("Idempotency-Key", .idempotencyKeyShape)
        case .keyReused: APIError(.idempotencyKeyReused)
        case .inProgress: APIError(.idempotencyInProgress)
        }
    }
}

extension PageError: DomainError {
    var apiError: APIError {
        switch self {
        case .invalidCursor: APIError(.invalidCursor)
        case .limitOutOfRange(let max): APIError.validation("limit", .between(1, max))
        }
    }
}

extension ChatRecord {
    var schema: Components.Schemas.Chat {
        .init(
            id: id.uuidString.lowercased(), title: title, subjectId: subjectID, topicId: topicID,
            status: status == "ended" ? .ended : .inProgress, createdAt: createdAt, updatedAt: updatedAt,
            messageCount: messageCount, lastMessagePreview: lastMessagePreview)
    }

    var tombstone: Components.Schemas.ChatTombstone {
        .init(id: id.uuidString.lowercased(), deleted: true, updatedAt: updatedAt)
    }
}

extension MessageRecord {
    var schema: Components.Schemas.Message {
        .init(
            id: id.uuidString.lowercased(), role: Components.Schemas.Message.RolePayload(rawValue: role) ?? .system,
            content: content, createdAt: createdAt)
    }
}

extension ChatTagRecord {
    var schema: Components.Schemas.ChatTag {
        .init(tagId: tagID.uuidString.lowercased(), code: code, label: label, mastery: mastery, updatedAt: updatedAt)
    }
}
