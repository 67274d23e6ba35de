import Foundation
import PostgresNIO

/// A distributed rate limiter: GCRA (the generic cell rate algorithm) with its one number per key —
/// the theoretical arrival time — kept in PostgreSQL and advanced by a single atomic upsert
/// (`bff_rate_limit_take`, migrations 0006 and 0007), so any number of replicas share one exact limit.
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

        /// From `bff_rate_limit_take`'s answer: whether the request was allowed and how far the
        /// key's theoretical arrival time now lies ahead, in seconds.
        package init(allowed: Bool, ahead: Double, rate: Int, periodSeconds: Double) {
            let interval = periodSeconds / Double(rate)
            self.allowed = allowed
            limit = rate
            resetAfter = max(0, ahead)
            if allowed {
                retryAfter = 0
                remaining = max(0, Int(((periodSeconds - ahead) / interval).rounded(.down)))
            } else {
                retryAfter = max(0, ahead + interval - periodSeconds)
                remaining = 0
            }
        }
    }

    let database: Database

    public init(database: Database) {
        self.database = database
    }

    /// Counts one request against `key`: at most `rate` requests per `per`, bursts included.
    public func limit(key: String, rate: Int, per period: Duration) async throws -> Decision {
        let periodSeconds = period.seconds
        let statement = TakeRateLimit(key: key, rate: rate, periodSeconds: periodSeconds)
        let (allowed, ahead) = try await database.run { client in
            for try await row in try await client.execute(statement) { return row }
            throw DatabaseUnavailable(reason: "the rate limiter's upsert returned no row")
        }
        return Decision(allowed: allowed, ahead: ahead, rate: rate, periodSeconds: periodSeconds)
    }

    /// Removes keys whose quota is fully restored; they behave exactly like absent keys.
    public func purgeExpired() async throws {
        try await database.deleteInBatches(from: "rate_limits", where: "tat < now()")
    }
}

/// `bff_rate_limit_take` as a prepared statement.
struct TakeRateLimit: PostgresPreparedStatement {
    static let name = "bff_take_rate_limit"
    static let sql = "SELECT allowed, ahead FROM bff_rate_limit_take($1, $2, $3)"
    typealias Row = (Bool, Double)

    let key: String
    let rate: Int
    let periodSeconds: Double

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(key)
        bindings.append(Int32(rate))
        bindings.append(periodSeconds)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode((Bool, Double).self)
    }
}
