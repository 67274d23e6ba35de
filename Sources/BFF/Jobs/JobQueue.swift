import Foundation
import Logging
import PostgresNIO

/// Enqueues jobs, always inside the caller's transaction: the change that causes a job and the job
/// commit together or not at all. The NOTIFY that wakes the workers is delivered at commit too.
public struct JobQueue: Sendable {
    /// The channel workers LISTEN on; the payload is the kind.
    static let channel = "bff_jobs"

    public struct Options: Sendable {
        public var userID: UUID?
        public var uniqueKey: String?
        public var runAt: Date?
        public var maxAttempts: Int

        public init(userID: UUID? = nil, uniqueKey: String? = nil, runAt: Date? = nil, maxAttempts: Int = 10) {
            self.userID = userID
            self.uniqueKey = uniqueKey
            self.runAt = runAt
            self.maxAttempts = maxAttempts
        }
    }

    /// Enqueues `kind` with `args` on `connection` (inside the caller's transaction); false when a job
    /// of the kind already holds the unique key, which makes the same work enqueued twice a no-op.
    @discardableResult
    public static func enqueue<Args: Encodable>(
        _ kind: String, _ args: Args, options: Options = .init(), on connection: PostgresConnection, logger: Logger
    ) async throws -> Bool {
        let json = String(decoding: try JSONEncoder().encode(args), as: UTF8.self)
        let rows = try await connection.query(
            """
            WITH inserted AS (
                INSERT INTO jobs (kind, args, user_id, unique_key, run_at, max_attempts)
                VALUES (\(kind), \(json)::jsonb, \(options.userID), \(options.uniqueKey), coalesce(\(options.runAt), now()), \(options.maxAttempts))
                ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
                RETURNING id
            )
            SELECT id, pg_notify(\(channel), \(kind))::text FROM inserted
            """, logger: logger)
        var inserted = false
        for try await _ in rows { inserted = true }
        return inserted
    }
}
