import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The moment a draining server ends the work it would otherwise be cut off in (a tutoring turn
/// still waiting for the LLM), early enough to answer it properly before the grace period runs
/// out and the remaining connections are closed.
public final class DrainDeadline: Sendable {
    private struct State {
        var passed = false
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Returns once the deadline has passed, or when the task is cancelled.
    package func wait() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLockedValue { state in
                    if state.passed || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    func pass() {
        let waiters = state.withLockedValue { state in
            state.passed = true
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Passes the deadline `after` the graceful shutdown begins. It is the last service of its
    /// group, so the first told of the shutdown; it returns at once and the group goes on to drain
    /// the server while its clock runs.
    package struct Clock: Service {
        let deadline: DrainDeadline
        let after: Duration
        let logger: Logger

        package init(deadline: DrainDeadline, after: Duration, logger: Logger) {
            self.deadline = deadline
            self.after = after
            self.logger = logger
        }

        package func run() async throws {
            do {
                try await gracefulShutdown()
            } catch {
                return  // cancelled: the process is ending without a drain
            }
            let (deadline, after, logger) = (deadline, after, logger)
            Task {
                try? await Task.sleep(for: after)
                logger.info("drain deadline: ending what still waits on others", metadata: ["after_s": .stringConvertible(after.seconds)])
                deadline.pass()
            }
        }
    }
}
