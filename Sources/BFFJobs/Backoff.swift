import BFFPlatform

/// When a failed job runs again: exponential in its attempts, with jitter so that jobs that failed
/// together (a push service's outage) do not return together, capped so that a long outage is
/// retried at least hourly. A `Retry-After` from the service is honoured, never shortened.
struct Backoff: Sendable {
    var base: Duration = .seconds(1)
    var cap: Duration = .seconds(3_600)

    /// The delay after run `attempt` (1 on the first) failed; `retryAfter` when the service gave one.
    func delay(afterAttempt attempt: Int, retryAfter: Duration?, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let exponential = min(base * (1 << exponent), cap)
        // 75–125 % of the step, never past the cap.
        let jittered = min(exponential * (0.75 + random / 2), cap)
        guard let retryAfter else { return jittered }
        // Up to a tenth more than the service asked, so that its clients do not come back at once.
        return retryAfter + retryAfter * (random / 10)
    }
}
