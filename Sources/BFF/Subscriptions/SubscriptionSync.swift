import BFFJobs
import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Re-syncs users from RevenueCat's canonical snapshot (JOB-003): the `iap.sync` job, which
/// webhooks, verifications that could not finish, the expiry job and the nightly reconcile ask for,
/// and those two periodic jobs.
///
/// RevenueCat's v1 API allows few requests, so syncs spend budgets shared by every process (rate
/// limiter keys): one for the syncs events ask for (`BFF_REVENUECAT_SYNC_RATE`), another for the
/// nightly reconcile (`BFF_REVENUECAT_RECONCILE_RATE`), so the reconcile never delays a purchase.
struct SubscriptionSync: Sendable {
    static let kind = "iap.sync"
    static let expiryKind = "iap.expiry"
    static let reconcileKind = "iap.reconcile"
    /// Removes a deleted account's customer at RevenueCat.
    static let deleteCustomerKind = "iap.delete_customer"
    /// Syncs one user's events ask for run at most once per window.
    static let window: Double = 10

    enum Reason: String, Codable, Sendable {
        /// A webhook named the user.
        case webhook
        /// A verification stored the receipt at RevenueCat but could not read the result back.
        case verify
        /// The user's access ends soon or has just ended.
        case expiry
        /// An event still waiting for this user's sync after its job gave up.
        case inbox
        /// The nightly pass over every live subscription.
        case reconcile
    }

    struct Args: Codable, Sendable {
        let userID: UUID
        let reason: Reason

        enum CodingKeys: String, CodingKey {
            case userID = "user_id"
            case reason
        }
    }

    struct CustomerArgs: Codable, Sendable {
        let appUserID: String

        enum CodingKeys: String, CodingKey { case appUserID = "app_user_id" }
    }

    let store: SubscriptionStore
    /// Nil without `BFF_REVENUECAT_API_KEY`: syncs wait for one.
    let client: RevenueCatClient?
    let limiter: RateLimiter
    let logger: Logger

    var configuration: SubscriptionConfiguration { store.configuration }

    /// Asks for syncs of `userIDs` on the caller's connection (inside its transaction, if any),
    /// coalesced by `bff_request_subscription_syncs`, which the webhook's statement calls too: one
    /// job per user and 10-second window. While the window's job has not started, it will read
    /// RevenueCat after this call and covers it; once started, the next window's job is asked for.
    static func request(_ userIDs: [UUID], reason: Reason, on connection: PostgresConnection, logger: Logger, now: Date = Date()) async throws {
        guard !userIDs.isEmpty else { return }
        _ = try await connection.query(
            """
            SELECT bff_request_subscription_syncs(\(userIDs), \(reason.rawValue), \(windowNumber(at: now)), \(window), \(kind), \(JobQueue.channel))
            """, logger: logger)
    }

    /// The number of the window `date` falls in.
    static func windowNumber(at date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / window).rounded(.down))
    }

    var handlers: [JobHandler] {
        // Enough at once to spend the budget while RevenueCat takes its time to answer.
        [
            JobHandler(kind: Self.kind, concurrency: min(64, max(2, configuration.syncRate))) { job in try await sync(job) },
            JobHandler(kind: Self.deleteCustomerKind, concurrency: 2) { job in try await deleteCustomer(job) },
        ]
    }

    var periodic: [PeriodicJob] {
        [
            PeriodicJob(every: configuration.expiryInterval, handler: JobHandler(kind: Self.expiryKind, concurrency: 1) { _ in try await expire() }),
            PeriodicJob(every: .seconds(86_400), handler: JobHandler(kind: Self.reconcileKind, concurrency: 1) { job in try await reconcile(job) }),
        ]
    }

    /// One user's re-sync: the snapshot RevenueCat gives now, applied newest-wins.
    func sync(_ job: Job) async throws {
        let args = try job.decode(Args.self)
        guard let client else {
            throw JobFailure.snooze("RevenueCat is not configured (BFF_REVENUECAT_API_KEY)", after: .seconds(300))
        }
        try await spendBudget(reconcile: args.reason == .reconcile)
        // Claimed right before the call, so the turns are the calls' spacing. The claim's time, on
        // the database's clock (the webhook events' too), precedes the call.
        guard let asked = try await claim(args.userID) else { return }
        do {
            let snapshot = try await client.subscriber(appUserID: args.userID.uuidString.lowercased())
            let exists = try await store.apply(snapshot, userID: args.userID, asked: asked)
            if !exists { logger.info("a subscription sync found the user deleted", metadata: ["user_id": .string(args.userID.uuidString)]) }
        } catch let failure as RevenueCatFailure {
            switch failure {
            case .unavailable(let reason, let retryAfter):
                throw JobFailure.retry("RevenueCat \(reason)", after: retryAfter)
            case .misconfigured(let reason), .refused(let reason):
                logger.error("RevenueCat refused our request; check BFF_REVENUECAT_API_KEY and BFF_REVENUECAT_BASE_URL", metadata: ["reason": .string(reason)])
                throw JobFailure.retry("RevenueCat \(reason)", after: .seconds(300))
            }
        }
    }

    /// Takes the user's 10-second turn to ask RevenueCat, across every process, and answers when (on
    /// the database's clock); nil when the user no longer exists (nothing to do). A turn taken less
    /// than 10 seconds ago makes the job wait for its end (a snooze: the job then covers whatever
    /// came meanwhile).
    private func claim(_ userID: UUID) async throws -> Date? {
        // A little over the window: two calls a turn apart never land in one window at RevenueCat.
        let period = Self.window + 0.25
        let (claimed, exists, startedAt) = try await store.database.run { client in
            for try await row in try await client.query(
                """
                WITH claimed AS (
                    INSERT INTO entitlements AS e (user_id, plan, snapshot_at, sync_started_at)
                    SELECT id, 'free', '-infinity', now() FROM users WHERE id = \(userID)
                    ON CONFLICT (user_id) DO UPDATE SET sync_started_at = now()
                    WHERE e.sync_started_at IS NULL OR e.sync_started_at <= now() - make_interval(secs => \(period))
                    RETURNING sync_started_at
                )
                SELECT (SELECT sync_started_at FROM claimed), EXISTS (SELECT 1 FROM users WHERE id = \(userID)),
                       (SELECT sync_started_at FROM entitlements WHERE user_id = \(userID))
                """, logger: logger
            ).decode((Date?, Bool, Date?).self) { return row }
            return (nil, false, nil)
        }
        if let claimed { return claimed }
        guard exists else { return nil }
        let wait = max(0.05, (startedAt ?? Date()).addingTimeInterval(period).timeIntervalSinceNow)
        throw JobFailure.snooze("a re-sync of this user ran less than \(period) seconds ago", after: .milliseconds(Int64(wait * 1000) + 1))
    }

    /// Marks webhook events done once every user they name has been re-synced since they came (or
    /// is gone), and answers the users of events still waiting after `stale`. Both times are the
    /// database's: a re-sync's is its claim, taken before RevenueCat is asked.
    static func settleInbox(_ client: PostgresClient, stale: Duration = .seconds(600), logger: Logger) async throws -> [UUID] {
        _ = try await client.query(
            """
            UPDATE revenuecat_events ev SET processed_at = now(), pending_users = '{}'
            WHERE ev.processed_at IS NULL AND NOT EXISTS (
                SELECT 1 FROM unnest(ev.pending_users) AS p(u)
                WHERE EXISTS (SELECT 1 FROM users WHERE id = p.u)
                  AND NOT EXISTS (SELECT 1 FROM entitlements e WHERE e.user_id = p.u AND e.synced_at >= ev.received_at))
            """, logger: logger)
        var waiting: [UUID] = []
        for try await user in try await client.query(
            """
            SELECT DISTINCT p.u FROM revenuecat_events ev, unnest(ev.pending_users) AS p(u)
            WHERE ev.processed_at IS NULL AND ev.received_at < now() - make_interval(secs => \(stale.seconds))
            LIMIT 10000
            """, logger: logger
        ).decode(UUID.self) { waiting.append(user) }
        return waiting
    }

    /// A deleted account's customer removed at RevenueCat; then the job forgets the id it held.
    func deleteCustomer(_ job: Job) async throws {
        let args = try job.decode(CustomerArgs.self)
        guard let client else {
            throw JobFailure.snooze("RevenueCat is not configured (BFF_REVENUECAT_API_KEY)", after: .seconds(300))
        }
        try await spendBudget(reconcile: false)
        do {
            try await client.deleteSubscriber(appUserID: args.appUserID)
        } catch {
            switch error {
            case .unavailable(let reason, let retryAfter): throw JobFailure.retry("RevenueCat \(reason)", after: retryAfter)
            case .misconfigured(let reason), .refused(let reason):
                logger.error("RevenueCat refused a customer deletion; check BFF_REVENUECAT_API_KEY", metadata: ["reason": .string(reason)])
                throw JobFailure.retry("RevenueCat \(reason)", after: .seconds(300))
            }
        }
        try await JobStore(database: store.database).forgetArguments(of: job.id)
    }

    /// Waits for a request of the budget; a wait longer than a few seconds gives the job back to
    /// the queue (the lease is not held idle).
    private func spendBudget(reconcile: Bool) async throws {
        let (key, rate) = reconcile ? ("revenuecat:reconcile", configuration.reconcileRate) : ("revenuecat:sync", configuration.syncRate)
        let started = ContinuousClock.now
        while true {
            let decision = try await limiter.limit(key: key, rate: rate, per: .seconds(1))
            if decision.allowed { return }
            let wait = Duration.milliseconds(Int64((decision.retryAfter * 1000).rounded(.up)) + 1)
            guard ContinuousClock.now - started + wait < .seconds(5) else {
                throw JobFailure.snooze("RevenueCat request budget spent", after: wait)
            }
            try await Task.sleep(for: wait)
        }
    }

    /// JOB-003's periodic run: re-syncs users whose access ends within 10 minutes or has ended since
    /// their last sync (a lost renewal webhook never cuts a paying user off, a lost expiry one never
    /// keeps a lapsed plan), re-asks for the syncs of events still waiting after 10 minutes, and
    /// purges old events and usage counters.
    func expire() async throws {
        try await store.database.run { client in
            try await client.withTransaction(logger: logger) { connection in
                var expiring: [UUID] = []
                for try await user in try await connection.query(
                    """
                    SELECT user_id FROM entitlements
                    WHERE plan <> 'free' AND access_until < now() + interval '10 minutes'
                      AND access_until > now() - interval '1 day' AND snapshot_at < access_until
                    LIMIT 10000
                    """, logger: logger
                ).decode(UUID.self) { expiring.append(user) }
                let waiting = try await Self.settleInbox(client, logger: logger)
                try await Self.request(expiring, reason: .expiry, on: connection, logger: logger)
                try await Self.request(waiting, reason: .inbox, on: connection, logger: logger)
                let count = expiring.count + waiting.count
                if count > 0 { logger.info("subscription re-syncs asked for", metadata: ["users": .stringConvertible(count)]) }
            }
        }
        try await store.database.deleteInBatches(from: "revenuecat_events", where: "processed_at < now() - interval '30 days'")
        try await store.database.deleteInBatches(from: "plan_usage", where: "day < current_date - 3")
    }

    /// The nightly reconcile: a sync of every user with a subscription not yet expired, spread over
    /// the night at the reconcile budget's pace.
    func reconcile(_ job: Job) async throws {
        let day = Int64(job.runAt.timeIntervalSince1970 / 86_400)
        let rate = Double(configuration.reconcileRate)
        let queued = try await store.database.run { client in
            var count = 0
            for try await n in try await client.query(
                """
                WITH live AS (SELECT DISTINCT user_id FROM iap_receipts WHERE status <> 'expired'),
                numbered AS (SELECT user_id, row_number() OVER (ORDER BY user_id) - 1 AS n FROM live)
                SELECT coalesce(bff_enqueue_jobs(
                    \(Self.kind), array_agg(jsonb_build_object('user_id', user_id, 'reason', 'reconcile')), array_agg(user_id),
                    array_agg('reconcile:' || \(day) || ':' || user_id), array_agg(now() + make_interval(secs => n / \(rate))), 10,
                    \(JobQueue.channel)), 0)::int8
                FROM numbered
                """, logger: logger
            ).decode(Int64.self) { count = Int(n) }
            return count
        }
        logger.info("nightly subscription reconcile queued", metadata: ["users": .stringConvertible(queued)])
    }
}
