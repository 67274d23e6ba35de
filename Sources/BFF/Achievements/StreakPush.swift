import BFFJobs
import BFFPlatform
import Foundation
import Logging

/// The streak's encouragement push (M-010): one a day at most, to a learner whose streak breaks
/// tonight (a streak ending yesterday, nothing yet today), inside their notification window, unless
/// notifications are off. A job per learner and day, queued by `StreakSweep`; it pushes through the
/// configured route as a recall's delivery does (the same senders, permits and answers), and the
/// push carries `type: streak`, the link to the achievements and nothing the learner wrote.
struct StreakPush: Sendable {
    static let kind = "achievements.streak_push"

    let achievements: AchievementStore
    let store: StreakPushStore
    /// For the tokens the services call dead.
    let tokens: PushTokenStore
    let senders: PushSenders
    /// The recall delivery's: the bound on pushes in flight is per process, whatever they are about.
    let permits: PushPermits
    /// `BFF_DEEP_LINK_BASE`: the push opens `achievements` under it.
    let deepLinkBase: String
    let pushConcurrency: Int
    let logger: Logger
    var now: @Sendable () -> Date = { Date() }

    struct Args: Codable {
        /// The learner day the push is for (`YYYY-MM-DD`, bff_learner_day's).
        let day: String
    }

    var handler: JobHandler {
        JobHandler(kind: Self.kind, concurrency: pushConcurrency) { job in try await push(job) }
    }

    /// Pushes when the learner still qualifies: their day is the job's, notifications are on, the
    /// window is open, and the streak still breaks tonight. Then the answers have the effects a
    /// recall's have: a dead token is deleted, a retry retries the job (the devices that took it are
    /// not pushed again), refused credentials or content dead-letter it.
    func push(_ job: Job) async throws {
        let args = try job.decode(Args.self)
        guard let userID = job.userID else { throw JobFailure.deadLetter("a streak push without its user") }
        guard
            let learner = try await store.snapshot(userID: userID, day: args.day, defaultZone: LearnerSettings.defaults.timezone),
            learner.day == args.day, learner.notificationsEnabled, learner.window.contains(now())
        else { return }
        let achieved = try await achievements.read(userID: userID)
        guard !achieved.todayDone, achieved.currentStreak >= 1 else { return }
        try await store.claim(userID: userID, day: args.day, streak: achieved.currentStreak)

        let (sendable, unserved) = senders.assign(learner.targets, userID: userID, notAccepted: learner.notAccepted)
        let message = Self.message(
            day: args.day, streak: achieved.currentStreak, language: learner.language ?? .default, deepLinkBase: deepLinkBase,
            expiresAt: learner.dayEnds)
        // As a recall's: the permits are held until the answers are recorded.
        let answered = try await permits.fanOut(
            to: sendable, push: { target, sender in await send(message, to: target, through: sender) },
            record: { answers in try await record(answers, userID: userID, day: args.day) })
        try RecallDelivery.verdict(answered, pending: sendable.count, unserved: unserved)
    }

    /// The push in the learner's language: fixed words and the streak's length, nothing of theirs;
    /// one per day on the device (the collapse id), worthless once the day is over.
    static func message(day: String, streak: Int, language: Language, deepLinkBase: String, expiresAt: Date) -> PushMessage {
        PushMessage(
            title: Phrase.streakPushTitle.text(in: language), body: Phrase.streakPushBody(days: streak).text(in: language),
            deepLink: "\(deepLinkBase)achievements", collapseID: "streak-\(day)", kind: .streak, expiresAt: expiresAt)
    }

    /// One push and what its answer means, counted as the recalls' are; logged, never with the token.
    private func send(_ message: PushMessage, to target: PushTarget, through sender: any PushSender) async -> PushOutcomeRecord {
        let route = senders.notificationHubs == nil ? target.provider.rawValue : "notification-hubs"
        var logger = self.logger
        logger[metadataKey: "push_kind"] = "streak"
        logger[metadataKey: "push_service"] = .string(route)
        return await PushOutcomeRecord.send(message, to: target, through: sender, route: route, logger: logger)
    }

    /// The keys of the tokens that took it, so a run again skips them; the dead tokens deleted.
    private func record(_ answers: [PushOutcomeRecord], userID: UUID, day: String) async throws {
        let accepted = answers.filter { $0.outcome == .accepted }.map { PushOutcomeStore.tokenKey($0.target.token) }
        try await store.recordAccepted(accepted, userID: userID, day: day)
        for dead in answers where dead.outcome == .dead {
            try await tokens.unregister(token: dead.target.token, userID: userID)
        }
    }
}
