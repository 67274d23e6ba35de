import BFFPlatform
import Crypto
import Foundation
import Logging
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
}

/// `recall_pushes` (migration 0030), its one owner: what each push of a recall came to, per token,
/// so that a delivery run again pushes only the tokens not yet accepted.
struct PushOutcomeStore: Sendable {
    let database: Database

    /// How a token is known outside `push_tokens`: the first 16 bytes of its SHA-256, in hex. The
    /// token itself is a credential and is never stored beside its outcome.
    static func tokenKey(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// Records a batch of answers for `recallID` in one statement (`bff_record_pushes`): the outcomes,
    /// the dead tokens deleted, and the recall taken to sent when one was accepted. True when this
    /// batch took it to sent.
    func record(_ records: [PushOutcomeRecord], recallID: UUID, userID: UUID, logger: Logger) async throws -> Bool {
        guard !records.isEmpty else { return false }
        let keys = records.map { Self.tokenKey($0.target.token) }
        let providers = records.map { $0.target.provider.rawValue }
        let outcomes = records.map { $0.outcome.rawValue }
        // The function's convention: negative when the service named no wait, empty for no error.
        let retryAfter = records.map { $0.retryAfter.map { max(0, $0.seconds) } ?? -1 }
        let errors = records.map { String(($0.reason ?? "").prefix(500)) }
        let dead = records.filter { $0.outcome == .dead }.map(\.target.token)
        return try await database.run { client in
            let rows = try await client.query(
                """
                SELECT bff_record_pushes(\(recallID), \(userID), \(keys)::text[], \(providers)::text[], \(outcomes)::text[],
                                         \(retryAfter)::float8[], \(errors)::text[], \(dead)::text[])
                """, logger: logger)
            for try await tookToSent in rows.decode(Bool.self) { return tookToSent }
            return false
        }
    }
}
