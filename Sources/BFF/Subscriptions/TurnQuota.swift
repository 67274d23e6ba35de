import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// The plans' hold on the tutoring turn: the features a plan lacks (403 `plan_required`) and the
/// turns a day it allows (429 `quota_exceeded` until the learner's day ends), refused with
/// `PlanRefusal`. Both read the entitlement as stored, so a downgrade or an expiry applies from the
/// next turn.
///
/// A turn is **reserved** before the LLM is asked, in one statement (`bff_reserve_turn`, inside
/// `bff_admit_turn`): checked and counted at once, so concurrent turns cannot all pass the last slot,
/// and a turn whose chat is deleted mid-stream has been counted all the same. It is given back only when nothing reached the
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

    /// An `entitlements` row as stored, before `SubscriptionStore.effective` reads it.
    typealias StoredEntitlement = (plan: String?, status: String?, accessUntil: Date?, willRenew: Bool?)

    /// The plan an entitlement row gives now; free without one.
    func plan(_ entitlement: StoredEntitlement?) -> Plan {
        guard let entitlement else { return .free }
        return subscriptions.effective(
            plan: entitlement.plan, status: entitlement.status, accessUntil: entitlement.accessUntil, willRenew: entitlement.willRenew
        ).plan
    }

    /// Refuses the turn when the plan lacks the mode; otherwise the plan's turns a day, nil for a plan
    /// without a daily limit. The reservation itself is `bff_reserve_turn`, inside `bff_admit_turn`.
    func allowance(plan: Plan, question: Bool) throws -> Int? {
        if question, let needed = limits.features[.instantQuestion], plan < needed {
            throw PlanRefusal.planRequired(.instantQuestion, needed: needed)
        }
        return limits.turns(for: plan)
    }

    /// Gives a reserved turn back: its reply never reached the learner.
    func giveBack(_ reservation: Reservation) async throws {
        try await subscriptions.database.run { client in
            _ = try await client.query(
                "SELECT bff_give_back_turn(\(reservation.userID), \(reservation.day)::date)", logger: subscriptions.logger)
        }
    }
}

/// A turn the learner's plan does not allow (the answers are in `SubscriptionHandlers.swift`).
enum PlanRefusal: Error, Equatable {
    /// The feature needs at least the plan `needed`.
    case planRequired(PlanLimits.Feature, needed: Plan)
    /// The plan's `allowed` turns a day are used; the learner's day ends in `secondsLeft`.
    case quotaExhausted(plan: Plan, allowed: Int, secondsLeft: Double)
}
