import BFFJobs
import BFFPlatform
import Crypto
import Foundation
import Logging
import Metrics
import PostgresNIO

/// The re-recall's last hop (JOB-001, JOB-002): a recall that comes due fans out into one push job
/// per registered device, and each push job asks its service once per attempt.
public struct RecallDelivery: Sendable {
    static let deliverKind = "recall.deliver"
    static let sendKind = "push.send"

    let database: Database
    let senders: PushSenders
    /// `BFF_DEEP_LINK_BASE`: the app's scheme, `learnapp://` by default.
    let deepLinkBase: String
    /// `BFF_PUSH_CONCURRENCY`: pushes in flight at once per process; each waits on a service's answer.
    let pushConcurrency: Int
    let logger: Logger
    var now: @Sendable () -> Date = { Date() }

    struct DeliverArgs: Codable {
        let recallID: UUID
        /// The due time this delivery was planned for: a recall moved since is delivered by the job of its new time.
        let dueAt: Double
    }

    struct SendArgs: Codable {
        let recallID: UUID
        let token: String
        let provider: String
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
            JobHandler(kind: Self.deliverKind) { job in try await deliver(job) },
            JobHandler(kind: Self.sendKind, concurrency: pushConcurrency) { job in try await send(job) },
        ]
    }

    /// Fans a due recall out to the user's devices, unless it was moved, answered or canceled, the
    /// user turned notifications off (it stays scheduled and listed), or the window closed meanwhile
    /// (it moves to the next opening).
    func deliver(_ job: Job) async throws {
        let args = try job.decode(DeliverArgs.self)
        guard let userID = job.userID else { throw JobFailure.deadLetter("a delivery without its user") }
        let logger = logger
        try await database.run { client in
            try await client.withTransaction(logger: logger) { connection in
                var recall: (status: String, dueAt: Date, enabled: Bool)?
                for try await row in try await connection.query(
                    """
                    SELECT r.status, r.due_at, coalesce(s.notifications_enabled, true)
                    FROM recalls r LEFT JOIN user_settings s ON s.user_id = r.user_id
                    WHERE r.id = \(args.recallID) AND r.user_id = \(userID)
                    FOR UPDATE OF r
                    """, logger: logger
                ).decode((String, Date, Bool).self) { recall = (row.0, row.1, row.2) }
                guard let recall, recall.status == "scheduled", abs(recall.dueAt.timeIntervalSince1970 - args.dueAt) < 0.001, recall.enabled
                else { return }
                let window = try await RecallScheduler.window(on: connection, userID: userID, logger: logger)
                let now = now()
                guard window.contains(now) else {
                    let placed = window.place(now)
                    _ = try await connection.query(
                        "UPDATE recalls SET due_at = \(placed), updated_at = now() WHERE id = \(args.recallID) AND user_id = \(userID)", logger: logger)
                    try await Self.enqueueDelivery(recallID: args.recallID, userID: userID, dueAt: placed, on: connection, logger: logger)
                    return
                }
                var targets: [PushTarget] = []
                for try await (token, provider) in try await connection.query(
                    "SELECT token, provider FROM push_tokens WHERE user_id = \(userID) ORDER BY token", logger: logger
                ).decode((String, String).self) {
                    targets.append(PushTarget(token: token, provider: .init(rawValue: provider) ?? .fcm))
                }
                for target in targets {
                    // One push per recall and token, ever: a delivery run again adds none.
                    let tokenKey = SHA256.hash(data: Data(target.token.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
                    try await JobQueue.enqueue(
                        Self.sendKind, SendArgs(recallID: args.recallID, token: target.token, provider: target.provider.rawValue),
                        options: .init(userID: userID, uniqueKey: "\(args.recallID.uuidString.lowercased()):\(tokenKey)", maxAttempts: 8),
                        on: connection, logger: logger)
                }
            }
        }
    }

    /// Pushes one recall to one device and maps the service's answer: sent marks the recall sent;
    /// a dead token is deleted; a retry waits (`Retry-After`); refused credentials or content are
    /// dead-lettered loudly. A recall opened, answered or canceled meanwhile, or a token gone, is not pushed.
    func send(_ job: Job) async throws {
        let args = try job.decode(SendArgs.self)
        guard let userID = job.userID else { throw JobFailure.deadLetter("a push without its user") }
        let provider = PushTokenRegistration.Provider(rawValue: args.provider) ?? .fcm
        let route = senders.notificationHubs == nil ? provider.rawValue : "notification-hubs"
        let logger = Self.logger(self.logger, recallID: args.recallID, service: route)
        // The catalogue's name for what the chat is about, never the chat's title: that is the
        // learner's own words (by default their first message's start), and a push shows on a lock screen.
        let current: (status: String, dueAt: Date, chatID: UUID, topic: String?, registered: Bool)? = try await database.run { client in
            for try await row in try await client.query(
                """
                SELECT r.status, r.due_at, r.chat_id, coalesce(t.name, s.name),
                       EXISTS (SELECT 1 FROM push_tokens p WHERE p.user_id = r.user_id AND p.token = \(args.token))
                FROM recalls r JOIN chats c ON c.id = r.chat_id AND c.user_id = r.user_id
                LEFT JOIN topics t ON t.id = c.topic_id
                LEFT JOIN subjects s ON s.id = c.subject_id
                WHERE r.id = \(args.recallID) AND r.user_id = \(userID)
                """, logger: logger
            ).decode((String, Date, UUID, String?, Bool).self) {
                return (row.0, row.1, row.2, row.3, row.4)
            }
            return nil
        }
        guard let current, current.status == "scheduled" || current.status == "sent", current.registered else { return }
        guard let sender = senders.sender(for: provider) else {
            throw JobFailure.snooze("no push service is configured for \(provider.rawValue) tokens", after: .seconds(600))
        }
        let message = Self.message(recallID: args.recallID, chatID: current.chatID, topic: current.topic, deepLinkBase: deepLinkBase, now: now())
        let sendStarted = ContinuousClock.now
        let outcome = await sender.send(message, to: PushTarget(token: args.token, provider: provider))
        Metrics.Timer(label: "bff_push_send_seconds", dimensions: [("service", route)]).record(duration: ContinuousClock.now - sendStarted)
        switch outcome {
        case .sent:
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", "sent")]).increment()
            // The recall's other device took it to sent already: nothing to write.
            let firstAcceptance = try await database.run { client in
                guard current.status == "scheduled" else { return false }
                var updated = false
                for try await _ in try await client.query(
                    """
                    UPDATE recalls SET status = 'sent', sent_at = now(), updated_at = now()
                    WHERE id = \(args.recallID) AND user_id = \(userID) AND status = 'scheduled'
                    RETURNING id
                    """, logger: logger)
                { updated = true }
                return updated
            }
            if firstAcceptance {
                Metrics.Timer(label: "bff_recall_delivery_delay_seconds")
                    .recordNanoseconds(Int64(max(0, now().timeIntervalSince(current.dueAt)) * 1e9))
            }
        case .tokenDead(let reason):
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", "token_dead")]).increment()
            logger.notice("push token is dead; deleted", metadata: ["reason": .string(reason)])
            try await database.run { client in
                _ = try await client.query("DELETE FROM push_tokens WHERE user_id = \(userID) AND token = \(args.token)", logger: logger)
            }
        case .retry(let reason, let after):
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", "retry")]).increment()
            throw JobFailure.retry(reason, after: after)
        case .configurationError(let reason):
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", "configuration_error")]).increment()
            logger.error("push service refused our credentials or setup; fix the configuration, then `bff jobs retry`", metadata: ["reason": .string(reason)])
            throw JobFailure.deadLetter("configuration: \(reason)")
        case .payloadError(let reason):
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", "payload_error")]).increment()
            logger.error("push service refused the notification's content", metadata: ["reason": .string(reason)])
            throw JobFailure.deadLetter("payload: \(reason)")
        }
    }

    private static func logger(_ base: Logger, recallID: UUID, service: String) -> Logger {
        var logger = base
        logger[metadataKey: "recall_id"] = .string(recallID.uuidString.lowercased())
        logger[metadataKey: "push_service"] = .string(service)
        return logger
    }

    /// The display notification, in Japanese: the chat's topic or subject by its catalogue name (a
    /// fixed line for a chat with neither), nothing the learner wrote, and the deep link.
    static func message(recallID: UUID, chatID: UUID, topic: String?, deepLinkBase: String, now: Date) -> PushMessage {
        let chat = chatID.uuidString.lowercased(), recall = recallID.uuidString.lowercased()
        return PushMessage(
            title: "復習の時間です",
            body: topic.map { "「\($0)」をもう一度説明してみよう" } ?? "前に学んだことをもう一度説明してみよう",
            deepLink: "\(deepLinkBase)chats/\(chat)?recall=\(recall)",
            collapseID: recall, recallID: recallID, chatID: chatID,
            expiresAt: now.addingTimeInterval(86_400))
    }
}
