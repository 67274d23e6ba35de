import NIOConcurrencyHelpers
import Testing

@testable import BFFPlatform

@Suite("Statement batcher")
struct StatementBatcherTests {
    /// A write that holds its first batch until released, so that the calls made meanwhile gather.
    final class Gate: Sendable {
        let batches = NIOLockedValueBox<[[Int]]>([])
        let opened = AsyncStream<Void>.makeStream()
        let entered = AsyncStream<Void>.makeStream()
    }

    @Test("calls made while a batch is written go together in the next one, each answered its own result in order")
    func callsGatherWhileABatchIsWritten() async throws {
        let gate = Gate()
        let batcher = StatementBatcher<Int, Int>(most: 3) { inputs in
            let first = gate.batches.withLockedValue { batches in
                batches.append(inputs)
                return batches.count == 1
            }
            if first {
                gate.entered.continuation.yield()
                for await _ in gate.opened.stream { break }
            }
            return inputs.map { $0 * 10 }
        }
        try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            group.addTask { (0, try await batcher.submit(0)) }
            for await _ in gate.entered.stream { break }
            for input in 1...4 { group.addTask { (input, try await batcher.submit(input)) } }
            // The four wait behind the first batch; give them time to queue, then let it finish.
            while true {
                try await Task.sleep(for: .milliseconds(10))
                if batcher.waiting == 4 { break }
            }
            gate.opened.continuation.yield()
            for try await (input, output) in group { #expect(output == input * 10) }
        }
        let batches = gate.batches.withLockedValue { $0 }
        #expect(batches.count == 3)
        #expect(batches.first == [0])
        // At most three a statement: the four that waited are written as three and one.
        #expect(batches.dropFirst().map(\.count) == [3, 1])
        #expect(Set(batches.dropFirst().flatMap { $0 }) == [1, 2, 3, 4])
    }

    struct Refused: Error {}

    @Test("a batch's failure reaches each of its calls, and the next call is written afresh")
    func aFailureReachesEveryCallOfItsBatch() async throws {
        let fail = NIOLockedValueBox(true)
        let batcher = StatementBatcher<Int, Int> { inputs in
            if fail.withLockedValue({ $0 }) { throw Refused() }
            return inputs
        }
        await #expect(throws: Refused.self) { try await batcher.submit(1) }
        fail.withLockedValue { $0 = false }
        #expect(try await batcher.submit(2) == 2)
    }

    @Test("a write that answers for fewer calls than it was given fails those calls instead of leaving one waiting")
    func aShortAnswerFailsTheBatch() async throws {
        let batcher = StatementBatcher<Int, Int> { _ in [] }
        await #expect(throws: StatementBatcherMismatch.self) { try await batcher.submit(1) }
    }
}
