import BFFJobs
import BFFPlatform
import Foundation
import Logging

/// Finds the learners whose streak breaks tonight and queues one `StreakPush` each: a periodic job
/// (`BFF_STREAK_SWEEP_INTERVAL`), a page of 1,000 learners with push tokens per statement
/// (`bff_streak_sweep`). A learner is looked at when the evening part of their notification window
/// begins (its last three hours; the whole window when shorter), in the sweep that follows and the
/// one after that: a streak at risk then stays at risk until the learner does something, and one
/// not at risk (nothing yesterday, or today done) cannot come to be so that day. So a learner costs
/// a window test in each sweep and a look at their last two days' facts once or twice a day, and the
/// jobs are only for those who get a push. Per-learner jobs planned ahead were the alternative; they
/// would need the turn to plan them, and the turn's path takes no more work.
struct StreakSweep: Sendable {
    static let kind = "achievements.streak_sweep"
    static let pageSize = 1_000
    /// The evening part of the window, in minutes: late enough that a learner had the day to
    /// study, early enough to still do it.
    static let lead = 180

    let store: StreakPushStore
    /// `BFF_STREAK_SWEEP_INTERVAL`.
    let interval: Duration
    let logger: Logger

    var periodic: PeriodicJob {
        PeriodicJob(every: interval, handler: JobHandler(kind: Self.kind, concurrency: 1) { _ in _ = try await sweep() })
    }

    /// One pass over every learner with push tokens; answers how many pushes it queued. `lookback`:
    /// how long after its evening began a learner is still looked at, two intervals by default (a
    /// sweep that ran late, or a tick two replicas both saw, queues nothing twice: the jobs are
    /// unique per learner and day).
    @discardableResult
    func sweep(lookback: Duration? = nil) async throws -> Int {
        let minutes = Int32(max(1, ((lookback ?? interval * 2).seconds / 60).rounded(.up)))
        // A learner who never saved settings has the default window, as the recalls' scheduler places theirs.
        let window = NotificationWindow.default
        let start = String(format: "%02d:%02d", window.start / 60, window.start % 60)
        let end = String(format: "%02d:%02d", window.end / 60, window.end % 60)
        let zone = LearnerSettings.defaults.timezone
        var after = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        var queued = 0
        while true {
            let page: (UUID?, Int32, Int32) = try await store.database.run { [after] client in
                for try await row in try await client.query(
                    """
                    SELECT last_user, learners, queued FROM bff_streak_sweep(
                        \(after), \(Int32(Self.pageSize)), \(zone), \(start)::time, \(end)::time, \(Int32(Self.lead)), \(minutes),
                        \(StreakPush.kind), \(JobQueue.channel))
                    """, logger: logger
                ).decode((UUID?, Int32, Int32).self) { return row }
                return (nil, 0, 0)
            }
            queued += Int(page.2)
            guard let last = page.0, page.1 == Int32(Self.pageSize) else { break }
            after = last
        }
        try await store.purge()
        if queued > 0 { logger.info("streak pushes queued", metadata: ["learners": .stringConvertible(queued)]) }
        return queued
    }
}
