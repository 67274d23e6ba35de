import BFFPlatform
import Foundation
import PostgresNIO

/// A learner's settings (M-006) in the shape of the contract.
struct LearnerSettings: Sendable, Equatable {
    struct SubjectPreference: Sendable, Equatable {
        let subjectID: String
        let topicIDs: [String]
        let difficulty: Int
    }

    var subjects: [SubjectPreference]
    var difficulty: Int
    var notifyStart: String
    var notifyEnd: String
    var timezone: String
    var theme: String
    /// Off: recalls are still scheduled and listed, but never pushed.
    var notificationsEnabled = true
    /// What pushes and answers without a usable `Accept-Language` are written in. Nil only in a
    /// replacement that leaves it out: the stored one stays.
    var language: Language? = .default

    /// What a learner who never saved settings gets.
    static let defaults = LearnerSettings(
        subjects: [], difficulty: 3, notifyStart: "08:00", notifyEnd: "18:00", timezone: "Asia/Tokyo", theme: "system",
        notificationsEnabled: true, language: .default)
}

struct SettingsStore: Sendable {
    let database: Database
    /// Re-places pending recalls in a replaced window, in the replacement's transaction.
    var recalls = RecallScheduler()

    func settings(userID: UUID) async throws -> LearnerSettings {
        try await database.run { client in
            try await Self.read(userID: userID) { try await client.query($0) }
        }
    }

    /// The learner's language alone (`LearnerLanguages`); the default when they never saved settings.
    func language(userID: UUID) async throws -> Language {
        try await database.run { client in
            var language = Language.default
            for try await stored in try await client.query("SELECT language FROM user_settings WHERE user_id = \(userID)").decode(String.self) {
                language = Language(rawValue: stored) ?? .default
            }
            return language
        }
    }

    /// The stored settings in one statement, so that a replacement committing meanwhile is seen
    /// whole or not at all.
    private static func read(userID: UUID, _ query: (PostgresQuery) async throws -> PostgresRowSequence) async throws -> LearnerSettings {
        let rows = try await query(
            """
            SELECT s.difficulty::int, to_char(s.notify_start, 'HH24:MI'), to_char(s.notify_end, 'HH24:MI'), s.timezone, s.theme,
                   s.notifications_enabled, s.language, p.subject_id, p.topic_ids, p.difficulty::int
            FROM user_settings s LEFT JOIN user_subject_prefs p ON p.user_id = s.user_id
            WHERE s.user_id = \(userID)
            ORDER BY p.subject_id
            """)
        var settings: LearnerSettings?
        for try await (difficulty, start, end, timezone, theme, notificationsEnabled, language, subject, topics, subjectDifficulty)
            in rows.decode((Int, String, String, String, String, Bool, String, String?, [String]?, Int?).self)
        {
            if settings == nil {
                settings = LearnerSettings(
                    subjects: [], difficulty: difficulty, notifyStart: start, notifyEnd: end, timezone: timezone, theme: theme,
                    notificationsEnabled: notificationsEnabled, language: Language(rawValue: language) ?? .default)
            }
            if let subject, let topics, let subjectDifficulty {
                settings?.subjects.append(.init(subjectID: subject, topicIDs: topics, difficulty: subjectDifficulty))
            }
        }
        return settings ?? .defaults
    }

    /// Replaces everything in one transaction, after checking the subjects and topics exist and agree;
    /// returns what it stored, as a read would.
    func replace(userID: UUID, with settings: LearnerSettings) async throws -> LearnerSettings {
        try await database.run { client in
            try await client.withTransaction(logger: database.logger) { connection in
                let catalogue = try await CatalogueStore.topicsBySubject(connection, logger: database.logger)
                for (index, preference) in settings.subjects.enumerated() {
                    guard let topics = catalogue[preference.subjectID] else {
                        throw CatalogueError.unknownSubject(field: "subjects[\(index)].subject_id")
                    }
                    if let unknown = preference.topicIDs.first(where: { !topics.contains($0) }) {
                        throw CatalogueError.unknownTopic(
                            field: "subjects[\(index)].topic_ids", problem: .notATopicOf(topic: unknown, subject: preference.subjectID))
                    }
                }
                _ = try await connection.query(
                    """
                    INSERT INTO user_settings (
                        user_id, difficulty, notify_start, notify_end, timezone, theme, notifications_enabled, language, updated_at)
                    VALUES (\(userID), \(settings.difficulty)::smallint, \(settings.notifyStart)::time, \(settings.notifyEnd)::time,
                            \(settings.timezone), \(settings.theme), \(settings.notificationsEnabled),
                            COALESCE(\(settings.language?.rawValue)::text, \(Language.default.rawValue)), now())
                    ON CONFLICT (user_id) DO UPDATE SET difficulty = excluded.difficulty, notify_start = excluded.notify_start,
                        notify_end = excluded.notify_end, timezone = excluded.timezone, theme = excluded.theme,
                        notifications_enabled = excluded.notifications_enabled,
                        language = COALESCE(\(settings.language?.rawValue)::text, user_settings.language), updated_at = now()
                    """, logger: database.logger)
                _ = try await connection.query("DELETE FROM user_subject_prefs WHERE user_id = \(userID)", logger: database.logger)
                for preference in settings.subjects {
                    _ = try await connection.query(
                        """
                        INSERT INTO user_subject_prefs (user_id, subject_id, topic_ids, difficulty)
                        VALUES (\(userID), \(preference.subjectID), \(preference.topicIDs), \(preference.difficulty)::smallint)
                        """, logger: database.logger)
                }
                try await recalls.replan(on: connection, userID: userID, logger: database.logger)
                return try await Self.read(userID: userID) { try await connection.query($0, logger: database.logger) }
            }
        }
    }
}
