import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Plans recalls inside the caller's transaction: after an evaluation (of the chat or of its
/// recall) and when the notification window changes. Each planned recall's delivery is a job due
/// at `due_at`, so it is handed to the push service within a poll interval of coming due.
struct RecallScheduler: Sendable {
    var repetition = SpacedRepetition()
    var now: @Sendable () -> Date = { Date() }

    struct Planned: Sendable {
        let id: UUID
        let dueAt: Date
    }

    /// Schedules the chat's next recall after an evaluation scored `score`; `previous` is the recall
    /// just evaluated, nil for the chat's own evaluation. A recall still pending for the chat is
    /// replaced: a chat evaluated again re-plans from the new rating.
    func scheduleNext(
        on connection: PostgresConnection, userID: UUID, chatID: UUID, score: Int, previous: SpacedRepetition.Plan?, logger: Logger
    ) async throws -> Planned {
        var mastery: Double?
        for try await value in try await connection.query(
            "SELECT avg(mastery) FROM chat_tags WHERE chat_id = \(chatID) AND user_id = \(userID)", logger: logger
        ).decode(Double?.self) { mastery = value }
        var basis = previous
        if basis == nil {
            // A chat evaluated again after recalls keeps its place on the ladder.
            for try await (step, interval) in try await connection.query(
                """
                SELECT step, interval_seconds FROM recalls WHERE chat_id = \(chatID) AND user_id = \(userID) AND status = 'done'
                ORDER BY done_at DESC LIMIT 1
                """, logger: logger
            ).decode((Int32, Double).self) { basis = .init(step: Int(step), intervalSeconds: interval) }
        }
        let plan = repetition.next(quality: SpacedRepetition.quality(score: score, mastery: mastery), previous: basis)
        let window = try await Self.window(on: connection, userID: userID, logger: logger)
        let target = now().addingTimeInterval(plan.intervalSeconds)
        let due = window.place(target)
        _ = try await connection.query(
            "DELETE FROM recalls WHERE chat_id = \(chatID) AND user_id = \(userID) AND status IN ('scheduled', 'sent', 'opened')",
            logger: logger)
        var id: UUID?
        for try await value in try await connection.query(
            """
            INSERT INTO recalls (user_id, chat_id, step, interval_seconds, target_at, due_at)
            VALUES (\(userID), \(chatID), \(plan.step), \(plan.intervalSeconds), \(target), \(due))
            RETURNING id
            """, logger: logger
        ).decode(UUID.self) { id = value }
        guard let id else { throw DatabaseUnavailable(reason: "recall insert returned no row") }
        try await RecallDelivery.enqueueDelivery(recallID: id, userID: userID, dueAt: due, on: connection, logger: logger)
        return Planned(id: id, dueAt: due)
    }

    /// Places the user's waiting recalls in their current window (settings were replaced, or
    /// notifications turned on): each gets a delivery at its new time; a delivery planned for the
    /// old time finds the recall moved and does nothing.
    func replan(on connection: PostgresConnection, userID: UUID, logger: Logger) async throws {
        let window = try await Self.window(on: connection, userID: userID, logger: logger)
        var pending: [(UUID, Date, Date)] = []
        for try await (id, target, due) in try await connection.query(
            "SELECT id, target_at, due_at FROM recalls WHERE user_id = \(userID) AND status = 'scheduled' FOR UPDATE", logger: logger
        ).decode((UUID, Date, Date).self) { pending.append((id, target, due)) }
        let now = now()
        for (id, target, due) in pending {
            let placed = window.place(max(target, now))
            if abs(placed.timeIntervalSince(due)) >= 0.001 {
                _ = try await connection.query(
                    "UPDATE recalls SET due_at = \(placed), updated_at = now() WHERE id = \(id) AND user_id = \(userID)", logger: logger)
            }
            try await RecallDelivery.enqueueDelivery(recallID: id, userID: userID, dueAt: placed, on: connection, logger: logger)
        }
    }

    /// The user's window, the default one when they never saved settings.
    static func window(on connection: PostgresConnection, userID: UUID, logger: Logger) async throws -> NotificationWindow {
        for try await (start, end, zone) in try await connection.query(
            "SELECT to_char(notify_start, 'HH24:MI'), to_char(notify_end, 'HH24:MI'), timezone FROM user_settings WHERE user_id = \(userID)",
            logger: logger
        ).decode((String, String, String).self) {
            return NotificationWindow(start: start, end: end, zone: zone)
        }
        return .default
    }
}
