import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// Enqueues jobs, always inside the caller's transaction: the change that causes a job and the job
/// commit together or not at all. The NOTIFY that wakes the workers is delivered at commit too. The
/// one SQL way in is `bff_enqueue_jobs` (migrations/functions), which stored functions call as well.
public struct JobQueue: Sendable {
    /// The channel workers LISTEN on; the payload is the kind.
    package static let channel = "bff_jobs"

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
            SELECT bff_enqueue_jobs(\(kind), ARRAY[\(json)::jsonb], ARRAY[\(options.userID)::uuid], ARRAY[\(options.uniqueKey)::text],
                                    ARRAY[\(options.runAt)::timestamptz], \(options.maxAttempts)::integer, \(channel))
            """, logger: logger)
        var inserted = false
        for try await queued in rows.decode(Int32.self) { inserted = queued > 0 }
        return inserted
    }
}
