import BFFPlatform
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Wakes the worker loop: a NOTIFY arrived, a job finished and freed a slot, or shutdown began. A ring
/// while nobody waits is kept for the next wait, so no wake-up is lost between two waits.
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    func ring() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next ring, or after `timeout`.
    func wait(upTo timeout: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let generation = state.withLockedValue { state -> UInt64? in
                if state.rung {
                    state.rung = false
                    return nil
                }
                state.waiter = continuation
                state.generation &+= 1
                return state.generation
            }
            guard let generation else {
                continuation.resume()
                return
            }
            let nanoseconds = Int64(timeout.seconds * 1e9)
            MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: .nanoseconds(max(nanoseconds, 0))) {
                let expired = self.state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                    guard state.generation == generation, let waiter = state.waiter else { return nil }
                    state.waiter = nil
                    return waiter
                }
                expired?.resume()
            }
        }
    }
}
