import BFFPlatform
import Crypto
import Foundation
import Logging
import Metrics
import PostgresNIO

/// What one push of a recall came to, as `recall_pushes` keeps it.
struct PushOutcomeRecord: Sendable {
    enum Outcome: String, Sendable {
        /// The service took it: never sent again for this recall.
        case accepted
        /// The token will never work again; it is deleted with this record.
        case dead
        /// Sent again when the delivery runs again (backoff, `Retry-After`).
        case retry
        /// Our credentials or the content were refused: sent again only after an operator's `bff jobs retry`.
        case error
    }

    let target: PushTarget
    let outcome: Outcome
    /// The service's `Retry-After`, for a retry that named one.
    var retryAfter: Duration? = nil
    /// What the service answered, for anything but an acceptance.
    var reason: String? = nil

    /// Sends one push (a recall's or a streak's) and says what its answer means: timed and counted
    /// by `route`, logged with `logger`'s metadata, never with the token.
    static func send(
        _ message: PushMessage, to target: PushTarget, through sender: any PushSender, route: String, logger: Logger
    ) async -> PushOutcomeRecord {
        let started = ContinuousClock.now
        let outcome = await sender.send(message, to: target)
        Metrics.Timer(label: "bff_push_send_seconds", dimensions: [("service", route)]).record(duration: ContinuousClock.now - started)
        func count(_ outcome: String) {
            Counter(label: "bff_push_total", dimensions: [("service", route), ("outcome", outcome)]).increment()
        }
        switch outcome {
        case .sent:
            count("sent")
            return PushOutcomeRecord(target: target, outcome: .accepted)
        case .tokenDead(let reason):
            count("token_dead")
            logger.notice("push token is dead; deleted", metadata: ["reason": .string(reason)])
            return PushOutcomeRecord(target: target, outcome: .dead, reason: reason)
        case .retry(let reason, let after):
            count("retry")
            return PushOutcomeRecord(target: target, outcome: .retry, retryAfter: after, reason: reason)
        case .configurationError(let reason):
            count("configuration_error")
            logger.error("push service refused our credentials or setup; fix the configuration, then `bff jobs retry`", metadata: ["reason": .string(reason)])
            return PushOutcomeRecord(target: target, outcome: .error, reason: "configuration: \(reason)")
        case .payloadError(let reason):
            count("payload_error")
            logger.error("push service refused the notification's content", metadata: ["reason": .string(reason)])
            return PushOutcomeRecord(target: target, outcome: .error, reason: "payload: \(reason)")
        }
    }
}

/// `recall_pushes` (migration 0030), its one owner: what each push of a recall came to, per token,
/// so that a delivery run again pushes only the tokens not yet accepted.
///
/// The deliveries running at once record together (`StatementBatcher`, one `bff_record_deliveries`
/// per batch). Measured with `scripts/bench push` (BENCH_PG_STATEMENTS=1): one call per recall was
/// the largest share of PostgreSQL's time in the 08:00 burst, 20,000 calls at 0.51 ms each.
final class PushOutcomeStore: Sendable {
    struct Answers: Sendable {
        let recallID: UUID
        let userID: UUID
        let records: [PushOutcomeRecord]
    }

    let database: Database
    private let batcher: StatementBatcher<Answers, Bool>

    init(database: Database, logger: Logger) {
        self.database = database
        batcher = StatementBatcher(most: 500) { batch in try await Self.write(batch, database: database, logger: logger) }
    }

    /// How a token is known outside `push_tokens`: the first 16 bytes of its SHA-256, in hex. The
    /// token itself is a credential and is never stored beside its outcome.
    static func tokenKey(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// Records a batch of answers for `recallID`: the outcomes, the dead tokens deleted, and the
    /// recall taken to sent when one was accepted. True when this batch took it to sent.
    func record(_ records: [PushOutcomeRecord], recallID: UUID, userID: UUID) async throws -> Bool {
        guard !records.isEmpty else { return false }
        return try await batcher.submit(Answers(recallID: recallID, userID: userID, records: records))
    }

    private static func write(_ batch: [Answers], database: Database, logger: Logger) async throws -> [Bool] {
        var recalls: [UUID] = [], users: [UUID] = [], keys: [String] = [], providers: [String] = [], outcomes: [String] = []
        var retryAfter: [Double] = [], errors: [String] = [], deadUsers: [UUID] = [], deadTokens: [String] = []
        for answers in batch {
            for record in answers.records {
                recalls.append(answers.recallID)
                users.append(answers.userID)
                keys.append(tokenKey(record.target.token))
                providers.append(record.target.provider.rawValue)
                outcomes.append(record.outcome.rawValue)
                // The function's convention: negative when the service named no wait, empty for no error.
                retryAfter.append(record.retryAfter.map { max(0, $0.seconds) } ?? -1)
                errors.append(String((record.reason ?? "").prefix(500)))
                if record.outcome == .dead {
                    deadUsers.append(answers.userID)
                    deadTokens.append(record.target.token)
                }
            }
        }
        let sent: Set<UUID> = try await database.run { [recalls, users, keys, providers, outcomes, retryAfter, errors, deadUsers, deadTokens] client in
            let rows = try await client.query(
                """
                SELECT bff_record_deliveries(\(recalls)::uuid[], \(users)::uuid[], \(keys)::text[], \(providers)::text[], \(outcomes)::text[],
                                             \(retryAfter)::float8[], \(errors)::text[], \(deadUsers)::uuid[], \(deadTokens)::text[])
                """, logger: logger)
            var sent: Set<UUID> = []
            for try await ids in rows.decode([UUID].self) { sent.formUnion(ids) }
            return sent
        }
        return batch.map { sent.contains($0.recallID) }
    }
}
