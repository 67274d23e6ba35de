import BFFJobs
import BFFPlatform
import Foundation
import Logging
import Metrics
import PostgresNIO

// Kept only so that `push.send` jobs enqueued by the previous release drain after a deploy: a
// recall's delivery now pushes to every device itself (RecallDelivery.deliver) and nothing enqueues
// this kind any more. Remove it once no `push.send` job is left in any environment
// (`bff jobs list --kind push.send`).
extension RecallDelivery {
    static let sendKind = "push.send"

    struct SendArgs: Codable {
        let recallID: UUID
        let token: String
        let provider: String
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
        let current: (status: String, dueAt: Date, chatID: UUID, topic: String?, language: Language, registered: Bool)? = try await database.run { client in
            for try await row in try await client.query(
                """
                SELECT r.status, r.due_at, r.chat_id,
                       coalesce(bff_catalogue_name(l.language, t.name, t.name_ja, t.name_en), bff_catalogue_name(l.language, s.name, s.name_ja, s.name_en)),
                       l.language,
                       EXISTS (SELECT 1 FROM push_tokens p WHERE p.user_id = r.user_id AND p.token = \(args.token))
                FROM recalls r JOIN chats c ON c.id = r.chat_id AND c.user_id = r.user_id
                LEFT JOIN topics t ON t.id = c.topic_id
                LEFT JOIN subjects s ON s.id = c.subject_id
                CROSS JOIN LATERAL (
                    SELECT coalesce((SELECT language FROM user_settings WHERE user_id = r.user_id), \(Language.default.rawValue)) AS language
                ) l
                WHERE r.id = \(args.recallID) AND r.user_id = \(userID)
                """, logger: logger
            ).decode((String, Date, UUID, String?, String, Bool).self) {
                return (row.0, row.1, row.2, row.3, Language(rawValue: row.4) ?? .default, row.5)
            }
            return nil
        }
        guard let current, current.status == "scheduled" || current.status == "sent", current.registered else { return }
        guard let sender = senders.sender(for: provider) else {
            throw JobFailure.snooze("no push service is configured for \(provider.rawValue) tokens", after: .seconds(600))
        }
        let message = Self.message(
            recallID: args.recallID, chatID: current.chatID, topic: current.topic, language: current.language, deepLinkBase: deepLinkBase, now: now())
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
}
