import BFFJobs
import BFFPlatform
import Foundation
import Logging
import Metrics
import PostgresNIO

/// The re-recall's last hop (JOB-001, JOB-002): a recall that comes due is one job that pushes to
/// every registered device of the learner and records each answer in `recall_pushes`, a batch per
/// statement, so the database's work is a few statements per recall rather than several per device
/// (docs/architecture.md, "Recall delivery"). A run again pushes only to the devices not yet accepted.
public struct RecallDelivery: Sendable {
    static let deliverKind = "recall.deliver"

    let database: Database
    let senders: PushSenders
    /// `BFF_DEEP_LINK_BASE`: the app's scheme, `learnapp://` by default.
    let deepLinkBase: String
    /// `BFF_PUSH_CONCURRENCY`: pushes in flight at once per process; each waits on a service's answer.
    let pushConcurrency: Int
    let logger: Logger
    var now: @Sendable () -> Date
    /// Shared by every delivery this value's handlers run: the bound is per process.
    let permits: PushPermits
    let outcomes: PushOutcomeStore
    let snapshots: RecallDeliverySnapshot.Reader

    init(
        database: Database, senders: PushSenders, deepLinkBase: String, pushConcurrency: Int, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.database = database
        self.senders = senders
        self.deepLinkBase = deepLinkBase
        self.pushConcurrency = pushConcurrency
        self.logger = logger
        self.now = now
        self.permits = PushPermits(max(1, pushConcurrency))
        self.outcomes = PushOutcomeStore(database: database, logger: logger)
        self.snapshots = RecallDeliverySnapshot.Reader(database: database, logger: logger)
    }

    struct DeliverArgs: Codable {
        let recallID: UUID
        /// The due time this delivery was planned for: a recall moved since is delivered by the job of its new time.
        let dueAt: Double
    }

    /// The recall's delivery at `dueAt`, in the caller's transaction; one per recall and due time.
    /// Public for the benchmark, which seeds recalls as the scheduler makes them.
    public static func enqueueDelivery(recallID: UUID, userID: UUID, dueAt: Date, on connection: PostgresConnection, logger: Logger) async throws {
        let millis = Int64((dueAt.timeIntervalSince1970 * 1000).rounded())
        try await JobQueue.enqueue(
            deliverKind, DeliverArgs(recallID: recallID, dueAt: dueAt.timeIntervalSince1970),
            options: .init(userID: userID, uniqueKey: "\(recallID.uuidString.lowercased())@\(millis)", runAt: dueAt, maxAttempts: 20),
            on: connection, logger: logger)
    }

    var handlers: [JobHandler] {
        [
            // As many recalls at once as pushes may be in flight: most learners have one or two
            // devices, and a delivery waiting for permits holds nothing else.
            JobHandler(kind: Self.deliverKind, concurrency: pushConcurrency) { job in try await deliver(job) },
            // The previous release's jobs (LegacyPushSend.swift), inside the same bound.
            JobHandler(kind: Self.sendKind, concurrency: pushConcurrency) { job in try await permits.withPermits(1) { try await send(job) } },
        ]
    }

    /// Pushes a due recall to the learner's devices not yet accepted, unless it was moved, answered
    /// or canceled, the learner turned notifications off (it stays scheduled and listed), or the
    /// window closed meanwhile (it moves to the next opening). Then: a retryable answer retries the
    /// job (only those devices, and any refused, are pushed on the next run); refused credentials or
    /// content dead-letter it for an operator.
    func deliver(_ job: Job) async throws {
        let args = try job.decode(DeliverArgs.self)
        guard let userID = job.userID else { throw JobFailure.deadLetter("a delivery without its user") }
        guard let recall = try await snapshots.read(recallID: args.recallID, userID: userID),
            recall.status == "scheduled" || recall.status == "sent",
            abs(recall.dueAt.timeIntervalSince1970 - args.dueAt) < 0.001, recall.notificationsEnabled
        else { return }
        // A recall sent already is being retried for its other devices: its window was checked when it came due.
        if recall.status == "scheduled", !recall.window.contains(now()) {
            try await moveToNextOpening(args, userID: userID)
            return
        }
        let (sendable, unserved) = senders.assign(recall.targets, userID: userID, notAccepted: recall.notAccepted)
        let message = Self.message(
            recallID: args.recallID, chatID: recall.chatID, topic: recall.topic, language: recall.language, deepLinkBase: deepLinkBase, now: now())
        let answered = try await permits.fanOut(
            to: sendable, push: { target, sender in await push(message, to: target, through: sender, recallID: args.recallID) },
            record: { answers in
                if try await outcomes.record(answers, recallID: args.recallID, userID: userID) {
                    Metrics.Timer(label: "bff_recall_delivery_delay_seconds")
                        .recordNanoseconds(Int64(max(0, now().timeIntervalSince(recall.dueAt)) * 1e9))
                }
            })
        try Self.verdict(answered, pending: sendable.count, unserved: unserved)
    }

    /// How the run ends once every batch is recorded: retried while any push may still go through,
    /// dead-lettered when the rest were refused for good, waiting while a provider has no service.
    static func verdict(_ answered: [PushOutcomeRecord], pending: Int, unserved: Set<String>) throws {
        let retries = answered.filter { $0.outcome == .retry }
        if !retries.isEmpty {
            throw JobFailure.retry(
                "\(retries.count) of \(pending) pushes to retry: \(reasons(retries))", after: retries.compactMap(\.retryAfter).max())
        }
        let refused = answered.filter { $0.outcome == .error }
        if !refused.isEmpty { throw JobFailure.deadLetter(reasons(refused)) }
        if !unserved.isEmpty {
            throw JobFailure.snooze("no push service is configured for \(unserved.sorted().joined(separator: ", ")) tokens", after: .seconds(600))
        }
    }

    /// The distinct reasons, in order, three at most: a service refusing every device says it once.
    private static func reasons(_ records: [PushOutcomeRecord]) -> String {
        var seen: [String] = []
        for reason in records.compactMap(\.reason) where !seen.contains(reason) { seen.append(reason) }
        return seen.prefix(3).joined(separator: "; ") + (seen.count > 3 ? "; …" : "")
    }

    /// One push and what its answer means; counted and logged, never with the token.
    private func push(_ message: PushMessage, to target: PushTarget, through sender: any PushSender, recallID: UUID) async -> PushOutcomeRecord {
        let route = senders.notificationHubs == nil ? target.provider.rawValue : "notification-hubs"
        return await PushOutcomeRecord.send(
            message, to: target, through: sender, route: route, logger: Self.logger(self.logger, recallID: recallID, service: route))
    }

    /// Outside the window: the recall moves to its next opening, with a delivery for then, unless it
    /// changed since it was read (the row's lock orders this with the learner's own changes).
    private func moveToNextOpening(_ args: DeliverArgs, userID: UUID) async throws {
        let logger = self.logger
        let now = self.now
        try await database.run { client in
            try await client.withTransaction(logger: logger) { connection in
                var current: (status: String, dueAt: Date)?
                for try await row in try await connection.query(
                    "SELECT status, due_at FROM recalls WHERE id = \(args.recallID) AND user_id = \(userID) FOR UPDATE", logger: logger
                ).decode((String, Date).self) { current = (row.0, row.1) }
                guard let current, current.status == "scheduled", abs(current.dueAt.timeIntervalSince1970 - args.dueAt) < 0.001 else { return }
                let window = try await RecallScheduler.window(on: connection, userID: userID, logger: logger)
                let placed = window.place(now())
                _ = try await connection.query(
                    "UPDATE recalls SET due_at = \(placed), updated_at = now() WHERE id = \(args.recallID) AND user_id = \(userID)", logger: logger)
                try await Self.enqueueDelivery(recallID: args.recallID, userID: userID, dueAt: placed, on: connection, logger: logger)
            }
        }
    }

    static func logger(_ base: Logger, recallID: UUID, service: String) -> Logger {
        var logger = base
        logger[metadataKey: "recall_id"] = .string(recallID.uuidString.lowercased())
        logger[metadataKey: "push_service"] = .string(service)
        return logger
    }

    /// The display notification, in the learner's language: the chat's topic or subject by its
    /// catalogue name (a fixed line for a chat with neither), nothing the learner wrote, and the deep link.
    static func message(recallID: UUID, chatID: UUID, topic: String?, language: Language = .default, deepLinkBase: String, now: Date) -> PushMessage {
        let chat = chatID.uuidString.lowercased(), recall = recallID.uuidString.lowercased()
        return PushMessage(
            title: Phrase.recallPushTitle.text(in: language),
            body: Phrase.recallPushBody(topic: topic).text(in: language),
            deepLink: "\(deepLinkBase)chats/\(chat)?recall=\(recall)",
            collapseID: recall, kind: .recall(recallID: recallID, chatID: chatID),
            expiresAt: now.addingTimeInterval(86_400))
    }
}
