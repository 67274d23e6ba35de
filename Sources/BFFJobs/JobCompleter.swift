import BFFPlatform
import NIOConcurrencyHelpers

/// Records completed jobs in batches, as a database groups commits: a completion that arrives while
/// a batch is being written joins the next one, so an idle worker writes each at once and a busy one
/// writes one UPDATE for many. Measured with `scripts/bench jobs push` (BENCH_PG_STATEMENTS=1): one
/// UPDATE per job was a third of the runtime's statements; batched, a busy worker completes about six
/// jobs per UPDATE, and the bare runtime went from about 1,200 to 1,580 jobs/s on the same machine.
/// `complete` returns once the job's row says so, as a single UPDATE would.
final class JobCompleter: Sendable {
    private struct State {
        var pending: [(id: Int64, done: CheckedContinuation<Void, any Error>)] = []
        var writing = false
    }

    private let store: JobStore
    private let worker: String
    private let state = NIOLockedValueBox(State())

    init(store: JobStore, worker: String) {
        self.store = store
        self.worker = worker
    }

    func complete(_ id: Int64) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let leads = state.withLockedValue { state in
                state.pending.append((id, done))
                defer { state.writing = true }
                return !state.writing
            }
            if leads { Task { await self.writeUntilEmpty() } }
        }
    }

    /// Writes what is pending, then what came meanwhile, until nothing is.
    private func writeUntilEmpty() async {
        while true {
            let batch = state.withLockedValue { state in
                defer { state.pending = [] }
                if state.pending.isEmpty { state.writing = false }
                return state.pending
            }
            if batch.isEmpty { return }
            do {
                try await store.complete(ids: batch.map(\.id), worker: worker)
                for entry in batch { entry.done.resume() }
            } catch {
                for entry in batch { entry.done.resume(throwing: error) }
            }
        }
    }
}
