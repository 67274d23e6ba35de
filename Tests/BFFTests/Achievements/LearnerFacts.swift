import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// What achievements are computed from, written with SQL at chosen instants: settings, chats, the
/// learner's messages, evaluations, finished recalls and tags. Each fact stamps its chat now, as the
/// server's writers do, so that a stored answer sees the change.
struct LearnerFacts: Sendable {
    let database: DatabaseURL
    let userID: UUID

    init(_ database: DatabaseURL, _ learner: Learner) {
        self.database = database
        self.userID = learner.id
    }

    func run(_ query: PostgresQuery) async throws {
        try await database.withClient { client in _ = try await client.query(query) }
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        try await database.withClient { client in
            for try await value in try await client.query(query).decode(Int.self) { return value }
            return 0
        }
    }

    /// Stored settings, as `PUT /settings` leaves them, `updatedAt` ago by default an hour.
    func settings(
        zone: String, language: String = "ja", start: String = "08:00", end: String = "18:00", notifications: Bool = true,
        updatedAt: Date = Date().addingTimeInterval(-3_600)
    ) async throws {
        try await run(
            """
            INSERT INTO user_settings (user_id, difficulty, notify_start, notify_end, timezone, theme, notifications_enabled, language, updated_at)
            VALUES (\(userID), 3, \(start)::time, \(end)::time, \(zone), 'system', \(notifications), \(language), \(updatedAt))
            ON CONFLICT (user_id) DO UPDATE SET notify_start = excluded.notify_start, notify_end = excluded.notify_end,
                timezone = excluded.timezone, notifications_enabled = excluded.notifications_enabled, language = excluded.language,
                updated_at = excluded.updated_at
            """)
    }

    /// A chat of the learner, last changed at `updatedAt`.
    func chat(subject: String? = nil, updatedAt: Date = Date()) async throws -> UUID {
        try await database.withClient { [userID] client in
            for try await id in try await client.query(
                """
                INSERT INTO chats (user_id, title, subject_id, created_at, updated_at)
                VALUES (\(userID), 'facts', \(subject), \(updatedAt), \(updatedAt)) RETURNING id
                """
            ).decode(UUID.self) { return id }
            throw TestSetupError("the chat was not stored")
        }
    }

    private func stamp(_ chat: UUID) async throws {
        try await run("UPDATE chats SET updated_at = greatest(updated_at, now()) WHERE id = \(chat) AND user_id = \(userID)")
    }

    /// A turn at `at`: the learner's message (`text`) and the tutor's reply a microsecond later.
    func turn(in chat: UUID, at: Date, text: String = "光合成は光を使ってでんぷんを作ることです") async throws {
        try await stamp(chat)
        try await run(
            """
            INSERT INTO messages (chat_id, user_id, role, content, created_at) VALUES
                (\(chat), \(userID), 'user', \(text), \(at)),
                (\(chat), \(userID), 'assistant', 'なるほど、では夜はどうなるの？', \(at) + interval '1 microsecond')
            """)
    }

    /// A reply alone (an instant question's): no explanation of the learner's.
    func reply(in chat: UUID, at: Date) async throws {
        try await stamp(chat)
        try await run("INSERT INTO messages (chat_id, user_id, role, content, created_at) VALUES (\(chat), \(userID), 'assistant', 'question', \(at))")
    }

    /// The chat's self-evaluation at `at` (first and latest).
    func evaluation(of chat: UUID, at: Date, score: Int = 4) async throws {
        try await stamp(chat)
        try await run(
            """
            INSERT INTO chat_evaluations (chat_id, user_id, score, created_at, updated_at) VALUES (\(chat), \(userID), \(score), \(at), \(at))
            """)
    }

    /// A recall of the chat evaluated at `doneAt`.
    func recall(of chat: UUID, doneAt: Date) async throws {
        try await stamp(chat)
        try await run(
            """
            INSERT INTO recalls (user_id, chat_id, status, step, interval_seconds, target_at, due_at, sent_at, opened_at, done_at, score)
            VALUES (\(userID), \(chat), 'done', 1, 86400, \(doneAt), \(doneAt), \(doneAt), \(doneAt), \(doneAt), 4)
            """)
    }

    /// A recall of the chat still waiting: not finished, not counted.
    func pendingRecall(of chat: UUID) async throws {
        try await run(
            """
            INSERT INTO recalls (user_id, chat_id, step, interval_seconds, target_at, due_at)
            VALUES (\(userID), \(chat), 0, 86400, now() + interval '1 day', now() + interval '1 day')
            """)
    }

    /// The catalogue tag `code` found in the chat, its mastery last moved at `at`.
    func tag(_ code: String, in chat: UUID, mastery: Double, at: Date) async throws {
        try await stamp(chat)
        try await run(
            """
            INSERT INTO chat_tags (chat_id, tag_id, user_id, mastery, updated_at)
            SELECT \(chat), id, \(userID), \(mastery), \(at) FROM tags WHERE code = \(code)
            ON CONFLICT (chat_id, tag_id) DO UPDATE SET mastery = excluded.mastery, updated_at = excluded.updated_at
            """)
    }

    /// A push token of the learner's, as registration stores it.
    func pushToken(_ token: String, provider: String) async throws {
        let platform = provider == "apns" ? "ios" : "android"
        try await run(
            """
            INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
            VALUES (\(userID), \(token), \(platform), \(provider), \("\(provider)-\(userID.uuidString.prefix(8))"))
            """)
    }

    /// Noon of the day `daysAgo` days before today in `zone`: always in the past, always that day.
    static func noon(daysAgo: Int, in zone: String) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        let day = calendar.date(byAdding: .day, value: -daysAgo, to: calendar.startOfDay(for: Date()))!
        return calendar.date(bySettingHour: 12, minute: 0, second: 0, of: day)!
    }

    /// Now, to the whole second: the answer's dates are written to the millisecond.
    static var now: Date { Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)) }

    /// An instant given as RFC 3339.
    static func at(_ text: String) -> Date {
        RFC3339Dates.dateOrNil(text)!
    }
}

/// A learner's `GET /api/v1/me/achievements`, read.
struct AchievementsAnswer {
    let response: TestResponse
    let json: [String: Any]

    init(_ response: TestResponse) {
        self.response = response
        self.json = response.json
    }

    var streak: (current: Int?, longest: Int?, todayDone: Bool?) {
        let streak = json["streak"] as? [String: Any]
        return (streak?["current"] as? Int, streak?["longest"] as? Int, streak?["today_done"] as? Bool)
    }

    var totals: [String: Int] { (json["totals"] as? [String: Any] ?? [:]).compactMapValues { $0 as? Int } }

    /// By subject: (mastered, total).
    var subjects: [String: (mastered: Int, total: Int)] {
        var subjects: [String: (mastered: Int, total: Int)] = [:]
        for subject in json["subjects"] as? [[String: Any]] ?? [] {
            guard let id = subject["subject_id"] as? String, let mastered = subject["mastered"] as? Int, let total = subject["total"] as? Int
            else { continue }
            subjects[id] = (mastered, total)
        }
        return subjects
    }

    var trophies: [[String: Any]] { json["trophies"] as? [[String: Any]] ?? [] }

    func trophy(_ code: String) -> [String: Any]? { trophies.first { $0["code"] as? String == code } }

    func unlockedAt(_ code: String) -> Date? { RFC3339Dates.dateOrNil(trophy(code)?["unlocked_at"] as? String) }

    /// `[current, target]`; fewer when either is missing.
    func progress(_ code: String) -> [Int] {
        let progress = trophy(code)?["progress"] as? [String: Any]
        return [progress?["current"], progress?["target"]].compactMap { $0 as? Int }
    }

    func name(_ code: String) -> String? { trophy(code)?["name"] as? String }
}

extension TestClientProtocol {
    func achievements(of learner: Learner, headers: HTTPFields = [:]) async throws -> AchievementsAnswer {
        let response = try await call(.get, "/api/v1/me/achievements", as: learner, headers: headers)
        #expect(response.status == .ok, "\(response.text)")
        return AchievementsAnswer(response)
    }
}
