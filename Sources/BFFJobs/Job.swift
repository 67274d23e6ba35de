import BFFPlatform
import Foundation

/// One claimed job, as its handler sees it.
public struct Job: Sendable {
    public let id: Int64
    public let kind: String
    /// The arguments as enqueued (a JSON object).
    public let args: Data
    public let userID: UUID?
    /// 1 on the first run.
    public let attempt: Int
    public let maxAttempts: Int
    /// When the job was due: the queue delay is measured from here.
    public let runAt: Date

    /// The arguments decoded as `type`; a job whose arguments do not decode cannot succeed on a retry.
    public func decode<Args: Decodable>(_ type: Args.Type) throws -> Args {
        do {
            return try JSONDecoder().decode(type, from: args)
        } catch {
            throw JobFailure.deadLetter("arguments do not decode as \(type): \(error)")
        }
    }
}

/// How a handler says a run failed other than with any error (which is retried with backoff).
public enum JobFailure: Error, CustomStringConvertible {
    /// Try again, not before `after` when the service said so (`Retry-After`).
    case retry(String, after: Duration?)
    /// Retrying cannot help (a payload the service refuses, a rejected credential): the job goes to
    /// the dead-letter queue at once, with the reason, for an operator.
    case deadLetter(String)
    /// Nothing went wrong, but the job cannot run yet (a push service with no credentials configured):
    /// it waits `after`, and the run does not count as an attempt.
    case snooze(String, after: Duration)

    public var description: String {
        switch self {
        case .retry(let reason, let after): after.map { "\(reason) (retry after \($0))" } ?? reason
        case .deadLetter(let reason): reason
        case .snooze(let reason, let after): "\(reason) (waiting \(after))"
        }
    }
}

/// What runs the jobs of one kind.
public struct JobHandler: Sendable {
    public let kind: String
    /// Jobs of this kind running at once in one process; nil takes `BFF_JOBS_CONCURRENCY`.
    public let concurrency: Int?
    public let run: @Sendable (Job) async throws -> Void

    public init(kind: String, concurrency: Int? = nil, run: @escaping @Sendable (Job) async throws -> Void) {
        self.kind = kind
        self.concurrency = concurrency
        self.run = run
    }
}

/// A job enqueued on a fixed period, once per tick across every process (each tick's job carries the
/// tick as its unique key), and runnable on its own with `bff jobs run NAME`.
public struct PeriodicJob: Sendable {
    public let handler: JobHandler
    public let every: Duration

    public init(every: Duration, handler: JobHandler) {
        self.every = every
        self.handler = handler
    }

    /// Whole seconds at least: ticks are counted in them.
    private var period: Double { max(1, every.seconds) }

    /// The tick `now` falls in, counted from 1970 in periods: the same on every replica.
    package func tick(at now: Date) -> Int64 {
        Int64((now.timeIntervalSince1970 / period).rounded(.down))
    }

    func start(ofTick tick: Int64) -> Date {
        Date(timeIntervalSince1970: Double(tick) * period)
    }

    /// Runs the job once, here and now, outside the queue (`bff jobs run NAME`), as the tick of `now`.
    package func runOnce(now: Date = Date()) async throws {
        let args = try JSONEncoder().encode(PeriodicTick(tick: tick(at: now)))
        try await handler.run(Job(id: 0, kind: handler.kind, args: args, userID: nil, attempt: 1, maxAttempts: 1, runAt: now))
    }
}

/// The arguments of a periodic job: the tick it was enqueued for.
struct PeriodicTick: Codable {
    let tick: Int64
}
