import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// What a streak push decides on, read in one statement: the learner's day (bff_learner_day), their
/// notification settings and language, their tokens, and the tokens this day's push was accepted for.
/// `user_settings` and `push_tokens` are only read here, as the recall delivery reads them.
struct StreakPushSnapshot: Sendable {
    /// The learner's day now (`YYYY-MM-DD`) and when it ends.
    let day: String
    let dayEnds: Date
    let notificationsEnabled: Bool
    let window: NotificationWindow
    /// The learner's setting; nil without settings.
    let language: Language?
    let targets: [PushTarget]
    /// Keys (`PushOutcomeStore.tokenKey`) of the tokens (or the hub's platform sends) this day's push
    /// was accepted for already.
    let acceptedKeys: Set<String>

    /// Those of `targets` this day's push was not accepted for yet.
    func notAccepted(_ targets: [PushTarget]) -> [PushTarget] {
        targets.filter { !acceptedKeys.contains(PushOutcomeStore.tokenKey($0.token)) }
    }
}

/// `streak_pushes` (migration 0034), its one owner: the guard of one streak push per learner and
/// day, and the keys of the tokens that took it.
struct StreakPushStore: Sendable {
    let database: Database
    let logger: Logger

    /// The learner as the push of `day` sees them now; nil when the account is gone.
    func snapshot(userID: UUID, day: String, defaultZone: String) async throws -> StreakPushSnapshot? {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT d.day::text, d.ends_at, coalesce(s.notifications_enabled, true), to_char(s.notify_start, 'HH24:MI'),
                       to_char(s.notify_end, 'HH24:MI'), s.timezone, s.language, coalesce(p.tokens, '{}'::text[]),
                       coalesce(p.providers, '{}'::text[]), coalesce(sp.accepted_keys, '{}'::text[])
                FROM users u
                CROSS JOIN LATERAL bff_learner_day(u.id, \(defaultZone)) d
                LEFT JOIN user_settings s ON s.user_id = u.id
                CROSS JOIN LATERAL (
                    SELECT array_agg(t.token ORDER BY t.token) AS tokens, array_agg(t.provider ORDER BY t.token) AS providers
                    FROM push_tokens t WHERE t.user_id = u.id
                ) p
                LEFT JOIN streak_pushes sp ON sp.user_id = u.id AND sp.day = \(day)::date
                WHERE u.id = \(userID)
                """, logger: logger)
            for try await (today, ends, enabled, start, end, zone, language, tokens, providers, accepted) in rows.decode(
                (String, Date, Bool, String?, String?, String?, String?, [String], [String], [String]).self)
            {
                let window = start.flatMap { start in end.flatMap { end in zone.map { NotificationWindow(start: start, end: end, zone: $0) } } }
                return StreakPushSnapshot(
                    day: today, dayEnds: ends, notificationsEnabled: enabled,
                    // The default window for a learner who never saved settings, as the sweep took it.
                    window: window ?? .default, language: language.flatMap(Language.init(rawValue:)),
                    targets: zip(tokens, providers).map { PushTarget(token: $0, provider: .init(rawValue: $1) ?? .fcm) },
                    acceptedKeys: Set(accepted))
            }
            return nil
        }
    }

    /// Records that `day`'s push is under way for the learner, with the streak it encourages: from
    /// here on the sweep passes them by that day. Nothing for an account that is gone.
    func claim(userID: UUID, day: String, streak: Int) async throws {
        try await database.run { client in
            _ = try await client.query(
                """
                INSERT INTO streak_pushes (user_id, day, streak)
                SELECT id, \(day)::date, \(Int32(clamping: streak)) FROM users WHERE id = \(userID)
                ON CONFLICT (user_id, day) DO NOTHING
                """, logger: logger)
        }
    }

    /// Adds the keys of the tokens that took `day`'s push; the first acceptance is its `sent_at`.
    func recordAccepted(_ keys: [String], userID: UUID, day: String) async throws {
        guard !keys.isEmpty else { return }
        try await database.run { client in
            _ = try await client.query(
                """
                UPDATE streak_pushes
                SET accepted_keys = ARRAY(SELECT DISTINCT k FROM unnest(accepted_keys || \(keys)::text[]) AS a(k) ORDER BY k),
                    sent_at = coalesce(sent_at, now())
                WHERE user_id = \(userID) AND day = \(day)::date
                """, logger: logger)
        }
    }

    /// Rows of days long past: the guard is needed only for the learner's current day.
    func purge() async throws {
        try await database.deleteInBatches(from: "streak_pushes", where: "day < current_date - 30")
    }
}
