import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Everything a recall's delivery decides on, read in one statement: the recall, the learner's
/// notification settings and window, what the chat is about, the learner's tokens, and the tokens
/// already accepted for this recall. Other owners' tables are only read here; the writes go through
/// `bff_record_pushes` (PushOutcomeStore) and, for a move to the window's next opening, the recall's
/// own transaction.
struct RecallDeliverySnapshot: Sendable {
    let status: String
    let dueAt: Date
    let chatID: UUID
    /// The catalogue's name for what the chat is about (topic, else subject), never the chat's
    /// title: that is the learner's own words (by default their first message's start), and a push
    /// shows on a lock screen.
    let topic: String?
    let notificationsEnabled: Bool
    let window: NotificationWindow
    /// The learner's registered tokens, in token order.
    let targets: [PushTarget]
    /// Keys (`PushOutcomeStore.tokenKey`) of the tokens this recall was accepted for already.
    let acceptedKeys: Set<String>

    /// The tokens still to push: neither accepted nor gone. A retry's or an error's token is pushed again.
    var pending: [PushTarget] {
        targets.filter { !acceptedKeys.contains(PushOutcomeStore.tokenKey($0.token)) }
    }

    /// The recall `recallID` of `userID` as its delivery sees it; nil when it is gone.
    static func read(recallID: UUID, userID: UUID, database: Database, logger: Logger) async throws -> RecallDeliverySnapshot? {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT r.status, r.due_at, r.chat_id, coalesce(t.name, s.name), coalesce(u.notifications_enabled, true),
                       to_char(u.notify_start, 'HH24:MI'), to_char(u.notify_end, 'HH24:MI'), u.timezone,
                       coalesce(p.tokens, '{}'::text[]), coalesce(p.providers, '{}'::text[]), coalesce(o.accepted, '{}'::text[])
                FROM recalls r
                JOIN chats c ON c.id = r.chat_id AND c.user_id = r.user_id
                LEFT JOIN topics t ON t.id = c.topic_id
                LEFT JOIN subjects s ON s.id = c.subject_id
                LEFT JOIN user_settings u ON u.user_id = r.user_id
                CROSS JOIN LATERAL (
                    SELECT array_agg(token ORDER BY token) AS tokens, array_agg(provider ORDER BY token) AS providers
                    FROM push_tokens WHERE user_id = \(userID)
                ) p
                CROSS JOIN LATERAL (
                    SELECT array_agg(token_key) AS accepted FROM recall_pushes
                    WHERE recall_id = r.id AND user_id = \(userID) AND outcome = 'accepted'
                ) o
                WHERE r.id = \(recallID) AND r.user_id = \(userID)
                """, logger: logger)
            for try await (status, dueAt, chatID, topic, enabled, start, end, zone, tokens, providers, accepted) in rows.decode(
                (String, Date, UUID, String?, Bool, String?, String?, String?, [String], [String], [String]).self)
            {
                let window = start.flatMap { start in end.flatMap { end in zone.map { NotificationWindow(start: start, end: end, zone: $0) } } }
                return RecallDeliverySnapshot(
                    status: status, dueAt: dueAt, chatID: chatID, topic: topic, notificationsEnabled: enabled,
                    // The default window when the learner never saved settings, as the scheduler placed it.
                    window: window ?? .default,
                    targets: zip(tokens, providers).map { PushTarget(token: $0, provider: .init(rawValue: $1) ?? .fcm) },
                    acceptedKeys: Set(accepted))
            }
            return nil
        }
    }
}
