import BFFPlatform
import Foundation
import HTTPTypes
import Logging
import PostgresNIO

/// The plans' hold on the tutoring turn: the features a plan lacks (403 `plan_required`) and the
/// turns a day it allows (429 `quota_exceeded` until the learner's day ends). Both read the
/// entitlement as stored, so a downgrade or an expiry applies from the next turn.
///
/// A turn is **reserved** before the LLM is asked, in one statement (`bff_reserve_turn`): checked and
/// counted at once, so concurrent turns cannot all pass the last slot, and a turn whose chat is
/// deleted mid-stream has been counted all the same. It is given back only when nothing reached the
/// learner (`giveBack`). The day is the learner's as it was opened (`bff_learner_day`): switching
/// the time zone afterwards opens no other day's allowance.
struct TurnQuota: Sendable {
    let subscriptions: SubscriptionStore
    let limits: PlanLimits

    /// A reserved turn: the learner's day it was counted in.
    struct Reservation: Sendable, Equatable {
        let userID: UUID
        /// The `plan_usage.day` it counted in, as PostgreSQL writes a date.
        let day: String
    }

    /// Refuses the turn when the plan lacks the mode or its turns for the day are used up, and
    /// otherwise reserves it; nil for a plan without a daily limit (nothing to give back).
    func reserve(userID: UUID, question: Bool) async throws -> Reservation? {
        let plan = try await plan(of: userID)
        if question, let needed = limits.features[.instantQuestion], plan < needed {
            throw APIError(.planRequired, "Instant questions need the \(needed.rawValue) plan.")
        }
        guard let allowed = limits.turns(for: plan) else { return nil }
        let (reserved, day, secondsLeft) = try await subscriptions.database.run { client in
            for try await row in try await client.query(
                "SELECT reserved, day::text, seconds_left FROM bff_reserve_turn(\(userID), \(Int32(clamping: allowed)), \(LearnerSettings.defaults.timezone))",
                logger: subscriptions.logger
            ).decode((Bool, String, Double).self) { return row }
            throw DatabaseUnavailable(reason: "bff_reserve_turn returned no row")
        }
        guard reserved else {
            throw APIError(
                .quotaExceeded, "Your \(plan.rawValue) plan allows \(allowed) tutoring turns a day; more when your day ends.",
                headers: [.retryAfter: String(max(1, Int(secondsLeft.rounded(.up))))])
        }
        return Reservation(userID: userID, day: day)
    }

    /// Gives a reserved turn back: its reply never reached the learner.
    func giveBack(_ reservation: Reservation) async throws {
        try await subscriptions.database.run { client in
            _ = try await client.query(
                """
                UPDATE plan_usage SET turns = turns - 1
                WHERE user_id = \(reservation.userID) AND day = \(reservation.day)::date AND turns > 0
                """, logger: subscriptions.logger)
        }
    }

    private func plan(of userID: UUID) async throws -> Plan {
        try await subscriptions.database.run { client in
            for try await row in try await client.query(
                "SELECT plan, status, access_until, will_renew FROM entitlements WHERE user_id = \(userID)", logger: subscriptions.logger
            ).decode((String?, String?, Date?, Bool?).self) {
                return subscriptions.effective(plan: row.0, status: row.1, accessUntil: row.2, willRenew: row.3).plan
            }
            return Plan.free
        }
    }
}
