import BFFPlatform
import BFFWire
import Foundation
import NIOConcurrencyHelpers
import PostgresNIO

/// Coalesces first pages of the chat list asked for at the same time into one statement.
///
/// The first page is the app's home screen and the busiest read. Every statement costs the server
/// ~130–160 µs in postgres-nio and task switches (measured here with a `SELECT 1` route), and
/// PostgreSQL its per-statement work, however little it reads. Requests on one event loop join that
/// loop's queue; while the loop has no such statement running, the queue goes out at once as one
/// `NewestChatsBatch`, so a lone request waits for nothing and under load one statement answers
/// several users. Each user's page comes from a subquery filtered by that user's id and goes back
/// only to the request that asked for it; the row echoes the position and user id, both checked.
final class FirstPageBatcher: Sendable {
    private struct Waiter: Sendable {
        let userID: UUID
        let limit: Int
        let continuation: CheckedContinuation<[ChatRecord], any Error>
        let joined: ContinuousClock.Instant
    }

    private struct Lane: Sendable {
        var queue: [Waiter] = []
        var running = false
        var statements = 0

        mutating func take() -> [Waiter] {
            statements += 1
            let count = min(queue.count, FirstPageBatcher.maxBatch)
            let taken = Array(queue.prefix(count))
            queue.removeFirst(count)
            return taken
        }

        /// Removes and returns the waiters that joined before `cutoff` (the queue is in joining order).
        mutating func expire(joinedBefore cutoff: ContinuousClock.Instant) -> [Waiter] {
            let count = queue.prefix { $0.joined < cutoff }.count
            defer { queue.removeFirst(count) }
            return Array(queue.prefix(count))
        }
    }

    struct Mismatch: Error, CustomStringConvertible {
        var description: String { "a batched first page came back for another position or user" }
    }

    static let maxBatch = 32

    private let database: Database
    private let lanes: [NIOLockedValueBox<Lane>]

    init(database: Database) {
        self.database = database
        lanes = database.clients.map { _ in NIOLockedValueBox(Lane()) }
    }

    /// Statements sent so far (the tests check that concurrent pages share them).
    var statements: Int {
        lanes.reduce(0) { sum, lane in sum + lane.withLockedValue { $0.statements } }
    }

    /// The newest `limit` chats of `userID`.
    func newest(userID: UUID, limit: Int) async throws -> [ChatRecord] {
        let pool = database.currentPool
        let lane = lanes[pool]
        return try await withCheckedThrowingContinuation { continuation in
            let batch = lane.withLockedValue { lane -> [Waiter]? in
                lane.queue.append(Waiter(userID: userID, limit: limit, continuation: continuation, joined: .now))
                // One statement per loop at a time: measured against two and four (scripts/bench, 32
                // connections, pool of 8), it gave the largest batches, the most pages per second and
                // the lowest p99, and it leaves the loop's other connections to everything else. (A
                // statement past its deadline may still be out when the next one goes.)
                guard !lane.running else { return nil }
                lane.running = true
                return lane.take()
            }
            if let batch {
                // A task of its own, inheriting nothing of this request (its cancellation, its task
                // locals): the batch answers other requests too.
                Task.detached { await self.drain(lane, of: pool, startingWith: batch) }
            }
        }
    }

    /// Runs `batch`, then what queued meanwhile, until the queue is empty, each on the lane's pool.
    private func drain(_ lane: NIOLockedValueBox<Lane>, of pool: Int, startingWith first: [Waiter]) async {
        var batch = first
        while true {
            if let error = await run(batch, on: pool), error is DatabaseUnavailable {
                // Each request had its own deadline before it joined a queue; behind a dead database
                // the queue would otherwise wait one deadline per batch.
                let queued = lane.withLockedValue { lane in
                    defer { lane.queue.removeAll() }
                    return lane.queue
                }
                for waiter in queued { waiter.continuation.resume(throwing: error) }
            }
            // Behind a slow database (answering, but each batch taking long), a page waits at most one
            // deadline in the queue, as it would for a connection: the queue cannot grow without end.
            let cutoff = ContinuousClock.now - database.timeout
            let (next, expired) = lane.withLockedValue { lane -> ([Waiter]?, [Waiter]) in
                let expired = lane.expire(joinedBefore: cutoff)
                guard !lane.queue.isEmpty else {
                    lane.running = false
                    return (nil, expired)
                }
                return (lane.take(), expired)
            }
            let late = DatabaseUnavailable(reason: "no statement for the first page within \(database.timeout)")
            for waiter in expired { waiter.continuation.resume(throwing: late) }
            guard let next else { return }
            batch = next
        }
    }

    /// Answers every waiter of `batch`; returns the error they got, if any.
    private func run(_ batch: [Waiter], on pool: Int) async -> (any Error)? {
        let statement = NewestChatsBatch(userIDs: batch.map(\.userID), limits: batch.map { Int32(clamping: $0.limit) })
        let pages: [[ChatRecord]]
        do {
            pages = try await database.run(pool: pool) { client in
                var pages = [[ChatRecord]?](repeating: nil, count: batch.count)
                for try await (index, userID, page) in try await client.execute(statement) {
                    guard pages.indices.contains(index), batch[index].userID == userID, pages[index] == nil else {
                        throw Mismatch()
                    }
                    pages[index] = page
                }
                return try pages.map { page in
                    guard let page else { throw Mismatch() }
                    return page
                }
            }
        } catch {
            for waiter in batch { waiter.continuation.resume(throwing: error) }
            return error
        }
        for (waiter, page) in zip(batch, pages) { waiter.continuation.resume(returning: page) }
        return nil
    }
}

/// First pages of several users: one row per user, its position in the arguments (from 0), its id,
/// and its page as `ChatStore.pageColumns`.
struct NewestChatsBatch: PostgresPreparedStatement {
    static let name = "bff_newest_chats_batch"
    static let sql = """
        SELECT b.position - 1, b.user_id, page.*
        FROM unnest($1::uuid[], $2::int4[]) WITH ORDINALITY AS b(user_id, page_limit, position)
        CROSS JOIN LATERAL (
            SELECT \(ChatStore.pageColumns) FROM (
                SELECT \(ChatStore.columns) FROM chats
                WHERE chats.user_id = b.user_id AND deleted_at IS NULL
                ORDER BY updated_at DESC, id DESC LIMIT b.page_limit) newest) page
        """
    typealias Row = (Int, UUID, [ChatRecord])

    let userIDs: [UUID]
    let limits: [Int32]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(userIDs)
        bindings.append(limits)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        var cells = row.makeIterator()
        guard let positionCell = cells.next(), let userCell = cells.next(),
            let positionBytes = positionCell.bytes, let position = BinaryValue.int(positionBytes, type: positionCell.dataType),
            let userBytes = userCell.bytes, let userID = BinaryValue.uuid(userBytes)
        else { throw FirstPageBatcher.Mismatch() }
        return (position, userID, try ChatRecord.page(&cells, list: .newest))
    }
}
