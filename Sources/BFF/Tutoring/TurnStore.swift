import BFFJobs
import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// The tutoring turn's three statements: one read and one admission before the LLM is asked, one
/// store after it. Each is one round trip: a turn is the app's most frequent write, and before this
/// it made 6–8 round trips before the call and 5–7 in its transaction. The read joins other owners'
/// tables read-only; every write goes through the owners' stored functions (`bff_admit_turn` composes
/// the quota's, the rate limiter's and the Idempotency-Key's; `bff_store_turn` the chats' and
/// messages', the job runtime's and the key's).
struct TurnStore: Sendable {
    let database: Database
    let logger: Logger

    /// Everything the turn decides on before it counts anything.
    struct Snapshot: Sendable {
        /// The Idempotency-Key's record within its lifetime: the first request's hash, and its answer
        /// once it has one.
        var key: (hash: Data, body: Data?)?
        /// The learner's entitlement as stored; nil without one.
        var entitlement: TurnQuota.StoredEntitlement?
        var difficulty: Int?
        /// The turn's chat when it names one the learner has and has not deleted.
        var chat: (status: String, subjectID: String?, topicID: String?, reopened: Bool)?
        /// The chat's newest 200 messages of the learner and the AI, oldest first.
        var history: [LLMMessage]
        /// For a new chat: whether its subject exists (true without one) and its topic's subject.
        var subjectExists: Bool
        var topicSubject: String?
        /// The names of the subject and topic the prompt speaks of.
        var subjectName: String?
        var topicName: String?
        /// The language asked for, else the learner's setting, else the default.
        var language: Language
    }

    /// The catalogue's names are read in `language`, else in the learner's setting (read here, in
    /// the same statement), the web's own name where a row has none in that language.
    func snapshot(userID: UUID, request: ChatTurn.Request, operation: String, key: String?, language: Language?) async throws -> Snapshot {
        let given = language?.rawValue
        let (chatID, subjectID, topicID) = (request.chatID, request.subjectID, request.topicID)
        let lifetime = IdempotencyStore.keyLifetime.seconds
        return try await database.run { client in
            let rows = try await client.query(
                """
                WITH k AS (
                    SELECT request_hash, response_body FROM idempotency_keys
                    WHERE user_id = \(userID) AND operation = \(operation) AND key = \(key)
                      AND created_at > now() - make_interval(secs => \(lifetime))
                ), c AS (
                    SELECT c.status, c.subject_id, c.topic_id,
                           EXISTS (SELECT 1 FROM recalls r WHERE r.chat_id = c.id AND r.user_id = c.user_id AND r.status = 'opened') AS reopened
                    FROM chats c WHERE c.id = \(chatID) AND c.user_id = \(userID) AND c.deleted_at IS NULL
                ), h AS (
                    SELECT role, content, created_at, id FROM messages
                    WHERE chat_id = \(chatID) AND user_id = \(userID) AND role IN ('user', 'assistant') AND EXISTS (SELECT 1 FROM c)
                    ORDER BY created_at DESC, id DESC LIMIT 200
                ), e AS (
                    SELECT plan, status, access_until, will_renew FROM entitlements WHERE user_id = \(userID)
                ), lang AS (
                    SELECT coalesce(\(given)::text, (SELECT language FROM user_settings WHERE user_id = \(userID)), \(Language.default.rawValue)) AS l
                ), ids AS (
                    SELECT CASE WHEN EXISTS (SELECT 1 FROM c) THEN (SELECT subject_id FROM c)
                                ELSE coalesce((SELECT subject_id FROM topics WHERE id = \(topicID)), \(subjectID)::text) END AS subject,
                           CASE WHEN EXISTS (SELECT 1 FROM c) THEN (SELECT topic_id FROM c) ELSE \(topicID)::text END AS topic
                )
                SELECT EXISTS (SELECT 1 FROM k), (SELECT request_hash FROM k), (SELECT response_body FROM k),
                       EXISTS (SELECT 1 FROM e), (SELECT plan FROM e), (SELECT status FROM e), (SELECT access_until FROM e), (SELECT will_renew FROM e),
                       (SELECT difficulty FROM user_settings WHERE user_id = \(userID)),
                       EXISTS (SELECT 1 FROM c), (SELECT status FROM c), (SELECT subject_id FROM c), (SELECT topic_id FROM c),
                       coalesce((SELECT reopened FROM c), false),
                       coalesce((SELECT array_agg(role ORDER BY created_at, id) FROM h), '{}'),
                       coalesce((SELECT array_agg(content ORDER BY created_at, id) FROM h), '{}'),
                       \(subjectID)::text IS NULL OR EXISTS (SELECT 1 FROM subjects WHERE id = \(subjectID)),
                       (SELECT subject_id FROM topics WHERE id = \(topicID)),
                       (SELECT bff_catalogue_name((SELECT l FROM lang), name, name_ja, name_en) FROM subjects WHERE id = (SELECT subject FROM ids)),
                       (SELECT bff_catalogue_name((SELECT l FROM lang), name, name_ja, name_en) FROM topics WHERE id = (SELECT topic FROM ids)),
                       (SELECT l FROM lang)
                """, logger: logger)
            for try await row in rows.decode(
                (
                    Bool, Data?, Data?, Bool, String?, String?, Date?, Bool?, Int16?, Bool, String?, String?, String?, Bool, [String], [String],
                    Bool, String?, String?, String?, String
                ).self)
            {
                let history = zip(row.14, row.15).map { role, content in LLMMessage(role: role == "user" ? .user : .assistant, content: content) }
                return Snapshot(
                    key: row.0 ? row.1.map { (hash: $0, body: row.2) } : nil,
                    entitlement: row.3 ? (plan: row.4, status: row.5, accessUntil: row.6, willRenew: row.7) : nil,
                    difficulty: row.8.map(Int.init),
                    chat: row.9 ? row.10.map { (status: $0, subjectID: row.11, topicID: row.12, reopened: row.13) } : nil,
                    history: history, subjectExists: row.16, topicSubject: row.17, subjectName: row.18, topicName: row.19,
                    language: Language(rawValue: row.20) ?? .default)
            }
            throw DatabaseUnavailable(reason: "the turn's read returned no row")
        }
    }

    /// How `bff_admit_turn` decided.
    enum Admission: Sendable, Equatable {
        /// Counted; `day` is the learner's day it counted in (nil for an unlimited plan).
        case admitted(day: String?)
        /// The day's turns are used up until the day ends.
        case quotaExhausted(secondsLeft: Double)
        /// Over the rate limit; the limiter's decision says until when.
        case rateLimited(RateLimiter.Decision)
        /// The Idempotency-Key's first request still runs.
        case keyBusy
    }

    struct Admit: Sendable {
        let userID: UUID
        /// The plan's turns a day; nil for a plan without a daily limit.
        let allowed: Int?
        let defaultZone: String
        let rateKey: String
        let rate: Int
        let period: Duration
        let operation: String
        let key: String?
        let requestHash: Data
        /// When the key's running first request counts as dead (its process died mid-call).
        let keyStale: Duration
    }

    func admit(_ admit: Admit) async throws -> Admission {
        let allowed = admit.allowed.map { Int32(clamping: $0) }
        let (lifetime, stale, period) = (IdempotencyStore.keyLifetime.seconds, admit.keyStale.seconds, admit.period.seconds)
        return try await database.run { client in
            let rows = try await client.query(
                """
                SELECT outcome, day::text, seconds_left, ahead FROM bff_admit_turn(
                    \(admit.userID), \(allowed)::integer, \(admit.defaultZone), \(admit.rateKey), \(Int32(clamping: admit.rate)), \(period),
                    \(admit.operation), \(admit.key)::text, \(admit.requestHash), \(lifetime), \(stale))
                """, logger: logger)
            for try await (outcome, day, secondsLeft, ahead) in rows.decode((String, String?, Double?, Double?).self) {
                switch outcome {
                case "admitted": return .admitted(day: day)
                case "quota": return .quotaExhausted(secondsLeft: secondsLeft ?? 0)
                case "rate":
                    return .rateLimited(RateLimiter.Decision(allowed: false, ahead: ahead ?? 0, rate: admit.rate, periodSeconds: period))
                case "busy": return .keyBusy
                default: throw DatabaseUnavailable(reason: "bff_admit_turn answered \(outcome)")
                }
            }
            throw DatabaseUnavailable(reason: "bff_admit_turn returned no row")
        }
    }

    /// What the turn stores after the LLM answered.
    struct Turn: Sendable {
        let userID: UUID
        /// Nil for a new chat, created with `title`, `subjectID` and `topicID`.
        let chatID: UUID?
        let title: String?
        let subjectID: String?
        let topicID: String?
        /// The learner's message; nil for an instant question.
        let message: String?
        let completion: LLMCompletion
        let operation: String
        let key: String?
    }

    enum Stored: Sendable, Equatable {
        case stored(ChatTurn.Result)
        /// The chat ended while the LLM answered.
        case ended
        /// The chat was deleted meanwhile.
        case gone
    }

    func store(_ turn: Turn) async throws -> Stored {
        let completion = turn.completion
        return try await database.run { client in
            let rows = try await client.query(
                """
                SELECT outcome, turn_chat, user_message, user_micros, reply_message, reply_micros FROM bff_store_turn(
                    \(turn.userID), \(turn.chatID)::uuid, \(turn.title)::text, \(turn.subjectID)::text, \(turn.topicID)::text,
                    \(turn.message)::text, \(completion.text), \(completion.model), \(Int32(clamping: completion.promptTokens)),
                    \(Int32(clamping: completion.completionTokens)), \(turn.operation), \(turn.key)::text, \(TagExtraction.kind), \(JobQueue.channel))
                """, logger: logger)
            for try await (outcome, chatID, userMessage, userMicros, reply, replyMicros) in rows.decode(
                (String, UUID, UUID?, Int64?, UUID?, Int64?).self)
            {
                switch outcome {
                case "stored":
                    guard let reply, let replyMicros else { throw DatabaseUnavailable(reason: "bff_store_turn stored no reply") }
                    let user = both(userMessage, userMicros).map { id, micros in
                        ChatTurn.StoredMessage(id: id, role: "user", content: turn.message ?? "", createdMicros: micros)
                    }
                    return .stored(
                        ChatTurn.Result(
                            chatID: chatID, userMessage: user,
                            reply: ChatTurn.StoredMessage(id: reply, role: "assistant", content: completion.text, createdMicros: replyMicros)))
                case "ended": return .ended
                default: return .gone
                }
            }
            throw DatabaseUnavailable(reason: "bff_store_turn returned no row")
        }
    }
}

extension TurnStore {
    /// Frees the key of a turn that failed, so that the app's re-send asks again.
    func release(_ key: IdempotencyStore.Key) async throws {
        try await database.run { client in
            try await client.withConnection { connection in try await IdempotencyStore.release(key, on: connection, logger: logger) }
        }
    }
}

/// Both values, or nil when either is missing.
private func both<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}
