import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Everything a recall's delivery decides on, read in one statement: the recall, the learner's
/// notification settings and window, what the chat is about, the learner's tokens, and the tokens
/// already accepted for this recall. Other owners' tables are only read here; the writes go through
/// `bff_record_deliveries` (PushOutcomeStore) and, for a move to the window's next opening, the recall's
/// own transaction.
struct RecallDeliverySnapshot: Sendable {
    let status: String
    let dueAt: Date
    let chatID: UUID
    /// The catalogue's name for what the chat is about (topic, else subject), never the chat's
    /// title: that is the learner's own words (by default their first message's start), and a push
    /// shows on a lock screen.
    let topic: String?
    /// The learner's setting: a push answers no request.
    let language: Language
    let notificationsEnabled: Bool
    let window: NotificationWindow
    /// The learner's registered tokens, in token order.
    let targets: [PushTarget]
    /// Keys (`PushOutcomeStore.tokenKey`) of the tokens this recall was accepted for already.
    let acceptedKeys: Set<String>

    /// Those of `targets` this recall was not accepted for yet (a device, or the hub's send per
    /// platform): a retry's or an error's token is pushed again.
    func notAccepted(_ targets: [PushTarget]) -> [PushTarget] {
        targets.filter { !acceptedKeys.contains(PushOutcomeStore.tokenKey($0.token)) }
    }

    /// Reads snapshots; the deliveries that start at once read together (`StatementBatcher`), one
    /// statement for all of them. Measured with `scripts/bench push` (BENCH_PG_STATEMENTS=1): one
    /// read per recall was 20,000 statements of 0.29 ms in the 08:00 burst, the second largest share
    /// of PostgreSQL's time after the recording.
    final class Reader: Sendable {
        struct Key: Sendable {
            let recallID: UUID
            let userID: UUID
        }

        private let batcher: StatementBatcher<Key, RecallDeliverySnapshot?>

        init(database: Database, logger: Logger) {
            batcher = StatementBatcher(most: 500) { keys in try await RecallDeliverySnapshot.read(keys, database: database, logger: logger) }
        }

        /// The recall `recallID` of `userID` as its delivery sees it; nil when it is gone.
        func read(recallID: UUID, userID: UUID) async throws -> RecallDeliverySnapshot? {
            try await batcher.submit(Key(recallID: recallID, userID: userID))
        }
    }

    /// The recalls of `keys` as their deliveries see them, in the keys' order; nil for one that is gone.
    private static func read(_ keys: [Reader.Key], database: Database, logger: Logger) async throws -> [RecallDeliverySnapshot?] {
        let recallIDs = keys.map(\.recallID), userIDs = keys.map(\.userID)
        let found: [UUID: RecallDeliverySnapshot] = try await database.run { client in
            let rows = try await client.query(
                """
                SELECT r.id, r.status, r.due_at, r.chat_id,
                       coalesce(bff_catalogue_name(l.language, t.name, t.name_ja, t.name_en), bff_catalogue_name(l.language, s.name, s.name_ja, s.name_en)),
                       l.language, coalesce(u.notifications_enabled, true),
                       to_char(u.notify_start, 'HH24:MI'), to_char(u.notify_end, 'HH24:MI'), u.timezone,
                       coalesce(p.tokens, '{}'::text[]), coalesce(p.providers, '{}'::text[]), coalesce(o.accepted, '{}'::text[])
                FROM unnest(\(recallIDs)::uuid[], \(userIDs)::uuid[]) AS q (recall_id, user_id)
                JOIN recalls r ON r.id = q.recall_id AND r.user_id = q.user_id
                JOIN chats c ON c.id = r.chat_id AND c.user_id = q.user_id
                LEFT JOIN topics t ON t.id = c.topic_id
                LEFT JOIN subjects s ON s.id = c.subject_id
                LEFT JOIN user_settings u ON u.user_id = q.user_id
                CROSS JOIN LATERAL (SELECT coalesce(u.language, \(Language.default.rawValue)) AS language) l
                CROSS JOIN LATERAL (
                    SELECT array_agg(token ORDER BY token) AS tokens, array_agg(provider ORDER BY token) AS providers
                    FROM push_tokens WHERE user_id = q.user_id
                ) p
                CROSS JOIN LATERAL (
                    SELECT array_agg(token_key) AS accepted FROM recall_pushes
                    WHERE recall_id = r.id AND user_id = q.user_id AND outcome = 'accepted'
                ) o
                """, logger: logger)
            var found: [UUID: RecallDeliverySnapshot] = [:]
            for try await (id, status, dueAt, chatID, topic, language, enabled, start, end, zone, tokens, providers, accepted) in rows.decode(
                (UUID, String, Date, UUID, String?, String, Bool, String?, String?, String?, [String], [String], [String]).self)
            {
                let window = start.flatMap { start in end.flatMap { end in zone.map { NotificationWindow(start: start, end: end, zone: $0) } } }
                found[id] = RecallDeliverySnapshot(
                    status: status, dueAt: dueAt, chatID: chatID, topic: topic, language: Language(rawValue: language) ?? .default,
                    notificationsEnabled: enabled,
                    // The default window when the learner never saved settings, as the scheduler placed it.
                    window: window ?? .default,
                    targets: zip(tokens, providers).map { PushTarget(token: $0, provider: .init(rawValue: $1) ?? .fcm) },
                    acceptedKeys: Set(accepted))
            }
            return found
        }
        return keys.map { found[$0.recallID] }
    }
}
