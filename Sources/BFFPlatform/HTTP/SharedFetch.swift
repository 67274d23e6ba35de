import NIOConcurrencyHelpers

/// A value fetched from another service that every caller shares. Concurrent callers that find it
/// missing or stale wait for one fetch, and after a failed fetch none starts again for
/// `failureBackoff`. Whoever can make the server fetch (a forged token's unknown `kid` on the
/// unauthenticated logout endpoint, a burst of logins after a restart) thus costs the provider one
/// request, and a provider that is down is not hammered by every request. The fetch must end by
/// itself (a deadline of its own): a waiting caller that is cancelled still waits for it.
package final class SharedFetch<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var fetchedAt: ContinuousClock.Instant?
        var inFlight: Task<Value, any Error>?
        var failure: (error: any Error, at: ContinuousClock.Instant)?
    }

    private enum Next {
        case ready(Value)
        case wait(Task<Value, any Error>)
    }

    private let state = NIOLockedValueBox(State())
    private let failureBackoff: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let fetch: @Sendable () async throws -> Value

    /// `now`: the clock ages and backoffs are measured by (a test's own, to age a value at once).
    package init(
        failureBackoff: Duration, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        fetch: @escaping @Sendable () async throws -> Value
    ) {
        self.failureBackoff = failureBackoff
        self.now = now
        self.fetch = fetch
    }

    /// The value, fetched first when there is none or `isStale(value, age)` holds. Within the backoff
    /// after a failed fetch, that failure is thrown instead of fetching.
    package func get(isStale: (Value, Duration) -> Bool) async throws -> Value {
        let now = now()
        let next: Next = try state.withLockedValue { state in
            if let value = state.value, let fetchedAt = state.fetchedAt, !isStale(value, now - fetchedAt) {
                return .ready(value)
            }
            if let inFlight = state.inFlight { return .wait(inFlight) }
            // A value held but stale for this caller (a key it names is not in it) is no answer: the
            // caller learns the provider is unavailable, as it would from a fetch of its own.
            if let failure = state.failure, now - failure.at < failureBackoff { throw failure.error }
            // The fetch cannot finish before this assignment: it takes the same lock to record its result.
            // Detached: the fetch serves every caller, so it carries none's task-locals (its request id).
            let task = Task.detached { [self] in try await run() }
            state.inFlight = task
            return .wait(task)
        }
        switch next {
        case .ready(let value): return value
        case .wait(let flight): return try await flight.value
        }
    }

    private func run() async throws -> Value {
        do {
            let value = try await fetch()
            state.withLockedValue { [now] in $0 = State(value: value, fetchedAt: now()) }
            return value
        } catch {
            state.withLockedValue {
                $0.inFlight = nil
                $0.failure = (error, now())
            }
            throw error
        }
    }
}
