import Foundation
import HTTPTypes
import Logging
import PostgresNIO

/// The plans' hold on the tutoring turn: the features a plan lacks (403 `plan_required`) and the
/// turns a day it allows (429 `quota_exceeded` until midnight in the learner's time zone). Both read
/// the entitlement as stored, so a downgrade or an expiry applies from the next turn.
struct TurnQuota: Sendable {
    let subscriptions: SubscriptionStore
    let limits: PlanLimits

    /// Refuses the turn when the plan lacks the mode or its turns for today are used up. A turn
    /// counts once it is stored (`count`), so a failed one costs nothing.
    func check(userID: UUID, question: Bool) async throws {
        let fallback = LearnerSettings.defaults.timezone
        // One round trip on the turn's path: the entitlement, and today's turns in the learner's day
        // (their saved time zone, else the settings' default) with the seconds until its end.
        let (plan, used, untilMidnight) = try await subscriptions.database.run { client in
            for try await row in try await client.query(
                """
                SELECT e.plan, e.status, e.access_until, e.will_renew, coalesce(u.turns, 0),
                       extract(epoch FROM ((date_trunc('day', now() AT TIME ZONE zone.name) + interval '1 day') AT TIME ZONE zone.name) - now())::float8
                FROM (SELECT coalesce((SELECT timezone FROM user_settings WHERE user_id = \(userID)), \(fallback)) AS name) zone
                LEFT JOIN entitlements e ON e.user_id = \(userID)
                LEFT JOIN plan_usage u ON u.user_id = \(userID) AND u.day = (now() AT TIME ZONE zone.name)::date
                """, logger: subscriptions.logger
            ).decode((String?, String?, Date?, Bool?, Int32, Double).self) {
                let entitlement = subscriptions.effective(plan: row.0, status: row.1, accessUntil: row.2, willRenew: row.3)
                return (entitlement.plan, Int(row.4), row.5)
            }
            return (Plan.free, 0, 86_400.0)
        }
        if question, let needed = limits.features[.instantQuestion], plan < needed {
            throw APIError(.planRequired, "Instant questions need the \(needed.rawValue) plan.")
        }
        guard let allowed = limits.turns(for: plan), used >= allowed else { return }
        throw APIError(
            .quotaExceeded, "Your \(plan.rawValue) plan allows \(allowed) tutoring turns a day; more from midnight.",
            headers: [.retryAfter: String(max(1, Int(untilMidnight.rounded(.up))))])
    }

    /// Counts a stored turn against today's quota, inside the turn's transaction.
    static func count(userID: UUID, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query(
            """
            INSERT INTO plan_usage (user_id, day, turns)
            SELECT \(userID), (now() AT TIME ZONE zone.name)::date, 1
            FROM (SELECT coalesce((SELECT timezone FROM user_settings WHERE user_id = \(userID)), \(LearnerSettings.defaults.timezone)) AS name) zone
            ON CONFLICT (user_id, day) DO UPDATE SET turns = plan_usage.turns + 1
            """, logger: logger)
    }
}
