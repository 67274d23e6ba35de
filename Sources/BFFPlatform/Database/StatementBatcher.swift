import NIOConcurrencyHelpers

/// Gathers concurrent calls of one statement into one, as a database groups commits: a call that
/// arrives while a batch is being written joins the next one, so an idle process writes each call
/// at once and a busy one writes one statement for many. Every call of a batch gets the batch's
/// failure. Where it pays is measured beside each use (`scripts/bench push` for the job runtime's
/// completions and the recall's delivery).
package final class StatementBatcher<Input: Sendable, Output: Sendable>: Sendable {
    private struct State {
        var pending: [(input: Input, done: CheckedContinuation<Output, any Error>)] = []
        var writing = false
    }

    private let most: Int
    /// Runs one batch; answers one output per input, in the inputs' order.
    private let write: @Sendable ([Input]) async throws -> [Output]
    private let state = NIOLockedValueBox(State())

    /// `most`: the largest batch one statement takes; the rest wait for the next.
    package init(most: Int = 1_000, write: @escaping @Sendable ([Input]) async throws -> [Output]) {
        self.most = max(1, most)
        self.write = write
    }

    package func submit(_ input: Input) async throws -> Output {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Output, any Error>) in
            let leads = state.withLockedValue { state in
                state.pending.append((input, done))
                defer { state.writing = true }
                return !state.writing
            }
            // A task inheriting nothing of the call that leads (its task locals, its trace, its
            // priority): the batch answers the other calls too.
            if leads { Task.detached { await self.writeUntilEmpty() } }
        }
    }

    /// Calls waiting for the next batch (tests).
    var waiting: Int { state.withLockedValue { $0.pending.count } }

    /// Writes what is pending, then what came meanwhile, until nothing is.
    private func writeUntilEmpty() async {
        while true {
            let batch = state.withLockedValue { state in
                let batch = Array(state.pending.prefix(most))
                state.pending.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            if batch.isEmpty { return }
            do {
                let outputs = try await write(batch.map(\.input))
                guard outputs.count == batch.count else {
                    throw StatementBatcherMismatch(inputs: batch.count, outputs: outputs.count)
                }
                for (entry, output) in zip(batch, outputs) { entry.done.resume(returning: output) }
            } catch {
                for entry in batch { entry.done.resume(throwing: error) }
            }
        }
    }
}

/// A batch's statement answered for a different number of calls than it was given: a bug in its
/// `write`, reported to each caller rather than leaving one waiting.
struct StatementBatcherMismatch: Error, CustomStringConvertible {
    let inputs: Int
    let outputs: Int
    var description: String { "a batched statement answered \(outputs) results for \(inputs) calls" }
}
