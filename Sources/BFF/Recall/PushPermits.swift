import NIOConcurrencyHelpers

/// The process's pushes in flight (`BFF_PUSH_CONCURRENCY`), shared by every recall's delivery: a
/// push holds a permit from before it is sent until its answer is recorded, so a worker killed at
/// any instant leaves at most this many pushes sent but unrecorded, the ones a run again sends twice.
///
/// A delivery takes the permits of a whole batch at once, granted in the order asked for and never
/// in part: deliveries each holding part of what they wait for would wait on one another for ever,
/// and a large batch behind a stream of small ones would never get its turn.
final class PushPermits: Sendable {
    let total: Int

    private struct Waiter: Sendable {
        let id: UInt64
        let count: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State: Sendable {
        var available: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>

    init(_ total: Int) {
        precondition(total >= 1, "at least one push in flight")
        self.total = total
        state = NIOLockedValueBox(State(available: total))
    }

    /// Runs `body` holding `count` permits (1…`total`), waiting for them first; cancelled while
    /// waiting, it throws `CancellationError` without running `body`.
    func withPermits<T: Sendable>(_ count: Int, _ body: () async throws -> T) async throws -> T {
        try await acquire(count)
        defer { release(count) }
        return try await body()
    }

    func acquire(_ count: Int) async throws {
        precondition((1...total).contains(count), "a batch of \(count) pushes with \(total) permits")
        let id = self.state.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted: Bool? = self.state.withLockedValue { state in
                    // Checked under the lock: a cancellation that came before the waiter was queued
                    // found nothing to remove.
                    if Task.isCancelled { return false }
                    if state.waiters.isEmpty, state.available >= count {
                        state.available -= count
                        return true
                    }
                    state.waiters.append(Waiter(id: id, count: count, continuation: continuation))
                    return nil
                }
                switch granted {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let (cancelled, granted) = self.state.withLockedValue { state -> (Waiter?, [Waiter]) in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return (nil, []) }
                let cancelled = state.waiters.remove(at: index)
                // The head may have been the one in the way of those behind it.
                return (cancelled, Self.grant(&state))
            }
            cancelled?.continuation.resume(throwing: CancellationError())
            for waiter in granted { waiter.continuation.resume() }
        }
    }

    func release(_ count: Int) {
        let granted = self.state.withLockedValue { state in
            state.available += count
            return Self.grant(&state)
        }
        for waiter in granted { waiter.continuation.resume() }
    }

    /// Takes the waiters at the head that now fit, in order; they are resumed outside the lock.
    private static func grant(_ state: inout State) -> [Waiter] {
        var granted: [Waiter] = []
        while let first = state.waiters.first, first.count <= state.available {
            state.available -= first.count
            granted.append(state.waiters.removeFirst())
        }
        return granted
    }
}
