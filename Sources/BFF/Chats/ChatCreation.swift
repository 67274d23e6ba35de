import BFFPlatform
import Crypto
import Foundation
import Logging
import PostgresNIO

/// Creating a chat, idempotently: with an `Idempotency-Key` the first response is stored with a hash of
/// the request, in the same transaction as the chat, and a retry with the same key and body gets that
/// response back. A concurrent duplicate waits on the key's row lock and then replays.
struct ChatCreation: Sendable {
    let database: Database
    let repository: ChatStore
    static let operation = "createChat"

    struct Request: Codable, Sendable {
        let title: String?
        let subjectID: String?
        let topicID: String?
    }

    enum Outcome: Sendable {
        case created(ChatRecord)
        case replayed(ChatRecord)
    }

    /// `language` words the default title; it is not part of the request, so a retry in another
    /// language replays the first answer.
    func create(userID: UUID, request: Request, idempotencyKey: String?, language: Language = .default) async throws -> Outcome {
        let title = try Self.title(request.title, language: language)
        try IdempotencyRequest.check(idempotencyKey)
        let requestHash = try IdempotencyRequest.hash(request)
        let logger = database.logger
        return try await database.run { client in
            try await client.withTransaction(logger: logger) { connection -> Outcome in
                let key = idempotencyKey.map { IdempotencyStore.Key(userID: userID, operation: Self.operation, key: $0) }
                // A concurrent duplicate waits here on the key's row, then replays what the first stored.
                if let key, !(try await IdempotencyStore.claim(key, requestHash: requestHash, on: connection, logger: logger)) {
                    return try await Self.replay(connection, key: key, requestHash: requestHash, logger: logger)
                }
                let (subjectID, topicID) = try await CatalogueStore.resolve(connection, subjectID: request.subjectID, topicID: request.topicID, logger: logger)
                let chat = try await repository.create(
                    on: connection, userID: userID, title: title, subjectID: subjectID, topicID: topicID, logger: logger)
                if let key {
                    try await IdempotencyStore.answer(key, status: 201, body: try JSONEncoder().encode(chat), on: connection, logger: logger)
                }
                return .created(chat)
            }
        }
    }

    private static func replay(_ connection: PostgresConnection, key: IdempotencyStore.Key, requestHash: Data, logger: Logger) async throws -> Outcome {
        // The first response as it was, even when its chat has been deleted since: a client that
        // lost it learns of the deletion from the delta pull, as of any other.
        guard let stored = try await IdempotencyStore.stored(key, requestHash: requestHash, on: connection, logger: logger), let body = stored,
            let chat = try? JSONDecoder().decode(ChatRecord.self, from: body)
        else { throw IdempotencyError.inProgress }
        return .replayed(chat)
    }

    /// Trimmed, 1–200 characters, no control characters; absent → a dated default in `language`.
    static func title(_ raw: String?, language: Language = .default) throws -> String {
        guard let raw else {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "Asia/Tokyo")
            formatter.dateFormat = "yyyy-MM-dd HH:mm"
            return Phrase.untitledChat(createdAt: formatter.string(from: Date())).text(in: language)
        }
        let title = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        // Code points, as PostgreSQL's length() (the CHECK) and JSON Schema's maxLength count them.
        guard (1...200).contains(title.unicodeScalars.count) else { throw ChatError.invalid(field: "title", problem: .titleLength) }
        // C0 controls and DEL, as the contract's pattern states.
        guard !title.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw ChatError.invalid(field: "title", problem: .noControlCharacters)
        }
        return title
    }
}

/// A chat's request refused for what it asks: a field outside the contract's rules (the answer is in
/// `ChatHandlers.swift`).
enum ChatError: Error, Equatable {
    case invalid(field: String, problem: Phrase.Problem)
}
