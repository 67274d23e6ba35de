import BFFAPI
import BFFPlatform
import BFFWire
import Foundation

/// The recall API (M-004, UC-002): the learner's re-recalls, the deep link's "opened", and the
/// re-evaluation that schedules the next one.
extension APIService {
    private static func recallID(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: text) else { throw APIError.validation("recall_id", .mustBeUUID) }
        return id
    }

    func listRecalls(_ input: Operations.ListRecalls.Input) async throws -> Operations.ListRecalls.Output {
        let principal = try AppRequestContext.principal()
        let limit = try PageLimit.resolve(input.query.limit, default: 20, max: 200)
        let statuses = Array(Set((input.query.status ?? []).map(\.rawValue))).sorted()
        let filter = statuses.joined(separator: ",")
        let cursor = try input.query.cursor.map { try KeysetCursor.decode($0, expecting: .recalls, filter: filter) }
        let rows = try await recalls.list(
            userID: principal.userID, statuses: statuses, limit: limit, after: cursor, language: await AppRequestContext.answerLanguage())
        let page = rows.prefix(limit)
        let next =
            rows.count > limit
            ? page.last.map { last in
                KeysetCursor(list: .recalls, micros: RFC3339.micros(last.dueAt) ?? 0, id: last.id, filter: filter).encoded()
            } : nil
        return .ok(.init(body: .json(.init(items: page.map(\.schema), nextCursor: next))))
    }

    func getRecall(_ input: Operations.GetRecall.Input) async throws -> Operations.GetRecall.Output {
        let principal = try AppRequestContext.principal()
        let recallID = try Self.recallID(input.path.recallId)
        guard let recall = try await recalls.find(userID: principal.userID, recallID: recallID, language: await AppRequestContext.answerLanguage()) else {
            throw RecallRefusal.missing
        }
        return .ok(.init(body: .json(recall.schema)))
    }

    func markRecallOpened(_ input: Operations.MarkRecallOpened.Input) async throws -> Operations.MarkRecallOpened.Output {
        let principal = try AppRequestContext.principal()
        try await recalls.open(userID: principal.userID, recallID: try Self.recallID(input.path.recallId))
        return .noContent(.init())
    }

    func evaluateRecall(_ input: Operations.EvaluateRecall.Input) async throws -> Operations.EvaluateRecall.Output {
        let principal = try AppRequestContext.principal()
        let recallID = try Self.recallID(input.path.recallId)
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        guard (1...5).contains(body.score) else { throw APIError.validation("score", .between(1, 5)) }
        if let note = body.note, note.unicodeScalars.count > 1000 { throw APIError.validation("note", .atMostCharacters(1000)) }
        let next = try await recalls.evaluate(
            userID: principal.userID, recallID: recallID, score: body.score, note: body.note, language: await AppRequestContext.answerLanguage())
        return .ok(.init(body: .json(next.schema)))
    }
}

extension RecallRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .missing: APIError(.notFound, .noSuchRecall)
        case .done: APIError(.recallDone)
        case .canceled: APIError(.recallCanceled)
        }
    }
}

extension RecallRecord {
    var schema: Components.Schemas.Recall {
        .init(
            id: id.uuidString.lowercased(), chatId: chatID.uuidString.lowercased(), chatTitle: chatTitle,
            tags: tags.map { .init(tagId: $0.id.uuidString.lowercased(), code: $0.code, label: $0.label) },
            dueAt: dueAt, status: Components.Schemas.RecallStatus(rawValue: status) ?? .scheduled)
    }
}
