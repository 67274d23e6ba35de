import Foundation
import PostgresNIO

/// A distributed rate limiter: GCRA (the generic cell rate algorithm) with its one number per key —
/// the theoretical arrival time — kept in PostgreSQL and advanced by a single atomic upsert, so any
/// number of replicas share one exact limit.
public struct RateLimiter: Sendable {
    public struct Decision: Sendable, Equatable {
        public var allowed: Bool
        /// How long until one more request would be allowed (zero when allowed).
        public var retryAfter: Double
        /// Requests still allowed right now after this one.
        public var remaining: Int
        public var limit: Int
        /// Seconds until the whole quota is available again.
        public var resetAfter: Double
    }

    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Counts one request against `key`: at most `rate` requests per `per`, bursts included.
    public func limit(key: String, rate: Int, per period: Duration) async throws -> Decision {
        let periodSeconds = Double(period.components.seconds) + Double(period.components.attoseconds) / 1e18
        let interval = periodSeconds / Double(rate)
        // ON CONFLICT DO UPDATE evaluates the SET against the latest row version under its row lock,
        // which is what makes concurrent callers on any replica agree. A refusal rewrites the same tat
        // and records the outcome, so RETURNING always reports the decision and the current tat.
        let query: PostgresQuery = """
            WITH clock AS (SELECT clock_timestamp() AS now)
            INSERT INTO rate_limits AS r (key, tat, last_allowed)
            SELECT \(key), clock.now + make_interval(secs => \(interval)), true FROM clock
            ON CONFLICT (key) DO UPDATE SET
                tat = CASE WHEN greatest(r.tat, (SELECT now FROM clock)) + make_interval(secs => \(interval))
                                <= (SELECT now FROM clock) + make_interval(secs => \(periodSeconds))
                           THEN greatest(r.tat, (SELECT now FROM clock)) + make_interval(secs => \(interval))
                           ELSE r.tat END,
                last_allowed = greatest(r.tat, (SELECT now FROM clock)) + make_interval(secs => \(interval))
                               <= (SELECT now FROM clock) + make_interval(secs => \(periodSeconds))
            RETURNING last_allowed, EXTRACT(EPOCH FROM tat - (SELECT now FROM clock))::float8
            """
        let (allowed, ahead) = try await database.run { client in
            let rows = try await client.query(query)
            for try await row in rows.decode((Bool, Double).self) { return row }
            throw DatabaseUnavailable(reason: "the rate limiter's upsert returned no row")
        }
        if allowed {
            let remaining = max(0, Int(((periodSeconds - ahead) / interval).rounded(.down)))
            return Decision(allowed: true, retryAfter: 0, remaining: remaining, limit: rate, resetAfter: max(0, ahead))
        }
        let retryAfter = max(0, ahead + interval - periodSeconds)
        return Decision(allowed: false, retryAfter: retryAfter, remaining: 0, limit: rate, resetAfter: max(0, ahead))
    }

    /// Removes keys whose quota is fully restored; they behave exactly like absent keys.
    public func purgeExpired() async throws {
        try await database.run { client in
            _ = try await client.query("DELETE FROM rate_limits WHERE tat < now()")
        }
    }
}
