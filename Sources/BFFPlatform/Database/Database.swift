import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import Synchronization
import Tracing
import _ConnectionPoolModule

/// The database could not be reached in time: the request is answered 503 `database_unavailable`.
package struct DatabaseUnavailable: Error, CustomStringConvertible {
    let reason: String

    package init(reason: String) {
        self.reason = reason
    }

    package var description: String { "database unavailable: \(reason)" }
}

/// The server's connection pools, with a deadline on every use so that a dead database turns into
/// fast 503s instead of requests queueing behind the pool's reconnect back-off.
///
/// The server has one pool per event loop (up to the pool size in connections) and a request uses
/// the pool of the loop it runs on, so the query is written, its rows read and the request resumed
/// on one thread. With one shared pool every query crossed threads twice, which on two cores cost
/// more than the query (docs/architecture.md#the-fast-path).
public struct Database: Sendable {
    struct Pool: Sendable {
        let loop: (any EventLoop)?
        let client: PostgresClient
    }

    private let pools: [Pool]
    public let logger: Logger
    package let timeout: Duration
    private let leases: Gauge
    private let leasesInFlight: NIOLockedValueBox<Int>
    private let turns = Turns()

    /// The pool of the current event loop (see `currentPool`).
    public var client: PostgresClient {
        pools[currentPool].client
    }

    /// The index in `clients` of the current event loop's pool; off the loops (tasks on Swift's
    /// default pool), each pool in turn, so that every connection is used.
    package var currentPool: Int {
        guard pools.count > 1 else { return 0 }
        if let current = MultiThreadedEventLoopGroup.currentEventLoop {
            for (index, pool) in pools.enumerated() where pool.loop === current { return index }
        }
        return turns.next() % pools.count
    }

    /// Every pool: each must run for the server's lifetime.
    public var clients: [PostgresClient] { pools.map(\.client) }

    /// A single pool (commands, tests).
    public init(
        client: PostgresClient, timeout: Duration = .seconds(5), poolSize: Int = 20,
        logger: Logger = Logger(label: "bff.database")
    ) {
        self.init(pools: [Pool(loop: nil, client: client)], timeout: timeout, poolSize: poolSize, logger: logger)
    }

    /// One pool per loop of `group`, splitting `poolSize` connections between them. With more loops
    /// than connections, only the first `poolSize` loops get a pool of one, and the others take
    /// turns: a process never opens more than `poolSize`, however many cores its host has.
    public init(
        configuration: DatabaseURL, perEventLoopOf group: MultiThreadedEventLoopGroup, timeout: Duration, poolSize: Int,
        logger: Logger
    ) {
        let loops = Array(group.makeIterator().prefix(max(1, poolSize)))
        let perLoop = max(1, poolSize / loops.count)
        var clientConfiguration = configuration.clientConfiguration(poolSize: perLoop)
        // postgres-nio parks every released connection with an idle-timeout timer (above the minimum)
        // and a keep-alive timer, each a task group with two child tasks and a Dispatch timer, cancelled
        // again by the next lease: on the list benchmark that was ~7 % of the server's CPU. The pool is
        // therefore opened in full and kept open; a connection PostgreSQL closes is replaced at once.
        clientConfiguration.options.minimumConnections = perLoop
        clientConfiguration.options.keepAliveBehavior = nil
        // The deadline cannot stop a statement already sent: postgres-nio waits for its answer, so one
        // stuck behind a lock held the request (and its connection) until the lock went. PostgreSQL
        // ends it at the deadline instead, and the transaction it belongs to rolls back.
        clientConfiguration.options.additionalStartupParameters.append(
            ("statement_timeout", String(Int(timeout.seconds * 1000))))
        let pools = loops.map { loop in
            Pool(
                loop: loop,
                client: PostgresClient(
                    configuration: clientConfiguration, eventLoopGroup: loop, backgroundLogger: logger))
        }
        self.init(pools: pools, timeout: timeout, poolSize: perLoop * loops.count, logger: logger)
    }

    private init(pools: [Pool], timeout: Duration, poolSize: Int, logger: Logger) {
        self.pools = pools
        self.logger = logger
        self.timeout = timeout
        self.leases = Gauge(label: "bff_db_pool_leases_in_use")
        self.leasesInFlight = .init(0)
        Gauge(label: "bff_db_pool_max_connections").record(poolSize)
    }

    /// Runs `body` against the current pool (or `pool`, an index of `clients`) within the deadline;
    /// connection-level failures become `DatabaseUnavailable`. Traced as a client span named after
    /// the calling function (postgres-nio makes no spans).
    public func run<Result: Sendable>(
        pool: Int? = nil, function: String = #function, fileID: String = #fileID,
        _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        // Chosen here, on the request's loop, before the deadline starts its task.
        let client = pool.map { pools[$0].client } ?? self.client
        // Only within a request's or a job's trace: the worker's polls would each be a trace of their own.
        guard Telemetry.isTracing, InstrumentationContext.current != nil else { return try await run(on: client, body) }
        return try await Telemetry.span(
            Self.spanName(function: function, fileID: fileID), kind: .client,
            attributes: ["db.system.name": "postgresql", "code.function.name": .string(function)]
        ) { _ in try await run(on: client, body) }
    }

    /// "postgresql ChatStore.page" for `page(…)` in ChatStore.swift.
    static func spanName(function: String, fileID: String) -> String {
        let file = fileID.split(separator: "/").last ?? Substring(fileID)
        let type = file.hasSuffix(".swift") ? file.dropLast(6) : file
        return "postgresql \(type).\(function.prefix { $0 != "(" })"
    }

    private func run<Result: Sendable>(
        on client: PostgresClient, _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        do {
            // Counted inside: an operation past its deadline may still hold its lease.
            return try await withDeadline(timeout) { [self] in
                track(+1)
                defer { track(-1) }
                return try await body(client)
            }
        } catch {
            throw Self.classify(error)
        }
    }

    /// Waits until every pool answers, at most six times the deadline of one use. Start-up calls it:
    /// the pools retry an unreachable server without end, so a server or `bff migrate` pointed at a
    /// wrong host, or started while the database is down, would otherwise wait silently for good.
    package func waitUntilReachable(_ url: DatabaseURL) async throws {
        let limit = timeout * 6
        let start = ContinuousClock.now
        var last: any Error = DatabaseUnavailable(reason: "not tried")
        while true {
            do {
                // All at once: one at a time, against a host that drops packets, an attempt would take
                // one deadline per pool.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for pool in pools.indices {
                        group.addTask { try await run(pool: pool) { client in _ = try await client.query("SELECT 1").collect() } }
                    }
                    try await group.waitForAll()
                }
                return
            } catch {
                last = error
            }
            guard ContinuousClock.now - start + .milliseconds(250) < limit else { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw StartupError(
            "no answer from the database at \(url.location) (BFF_DATABASE_URL) within \(Int(limit.seconds)) s (\(last));"
                + " the log lines of component postgres give each attempt's reason")
    }

    /// Statements a housekeeping pass runs at most for one table.
    static let batchesPerPass = 20

    /// Housekeeping deletes in batches: runs `batch` (one statement covering at most `size` rows,
    /// returning how many it covered) until one covers fewer, at most `batchesPerPass` times, and
    /// stops early at shutdown. Each batch is its own statement under the deadline; a backlog drains
    /// over several passes instead of holding one.
    package func inBatches(of size: Int, _ batch: @escaping @Sendable (PostgresClient) async throws -> Int) async throws {
        for _ in 0..<Self.batchesPerPass {
            guard try await run(batch) == size, !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
        }
    }

    /// Housekeeping: deletes the rows of `table` matching `condition`, 5,000 per statement. One
    /// DELETE over a backlog would run past `statement_timeout`, roll back, and find a larger backlog
    /// at every later pass. Both arguments are SQL of this program's own, never input.
    package func deleteInBatches(from table: String, where condition: String) async throws {
        try await inBatches(of: 5000) { client in
            let rows = try await client.query(
                """
                WITH deleted AS (
                    DELETE FROM \(unescaped: table) WHERE ctid IN (
                        SELECT ctid FROM \(unescaped: table) WHERE \(unescaped: condition) LIMIT 5000)
                    RETURNING 1
                )
                SELECT count(*)::int FROM deleted
                """)
            for try await deleted in rows.decode(Int.self) { return deleted }
            return 0
        }
    }

    /// Connection-level failures become `DatabaseUnavailable`; a transaction's wrapper gives way to the
    /// error that broke it, so a domain error thrown inside a transaction reaches the client as its own answer.
    static func classify(_ error: any Error) -> any Error {
        switch error {
        case let error as PostgresTransactionError:
            return classify(error.cause ?? error)
        case let error as PSQLError where isConnectionFailure(error):
            return DatabaseUnavailable(reason: "\(error.code)")
        case let error as PSQLError where error.serverInfo?[.sqlState] == "57014":
            // query_canceled: `statement_timeout` (the deadline) or an operator's pg_cancel_backend.
            return DatabaseUnavailable(reason: "statement cancelled")
        case let error as ConnectionPoolError:
            // The pool's own error: it only ever means "no connection".
            return DatabaseUnavailable(reason: "\(error)")
        default:
            return error
        }
    }

    /// One round trip, used by readiness.
    public func ping() async throws {
        try await run { client in
            let rows = try await client.query("SELECT 1")
            for try await _ in rows {}
        }
    }

    private func track(_ delta: Int) {
        let value = leasesInFlight.withLockedValue { count -> Int in
            count += delta
            return count
        }
        leases.record(value)
    }

    static func isConnectionFailure(_ error: PSQLError) -> Bool {
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
            .sslUnsupported, .failedToAddSSLHandler:
            return true
        case .server:
            // Class 08 (connection exception) and 57P0x (operator intervention: shutdown, cannot connect now).
            let state = error.serverInfo?[.sqlState] ?? ""
            return state.hasPrefix("08") || state.hasPrefix("57P")
        default:
            return false
        }
    }
}

/// Runs `operation` with a deadline: when it passes, the operation is cancelled and the call throws
/// `expired()` (`DatabaseUnavailable` unless given), or returns what the operation still returns
/// within `settling` of it. postgres-nio cannot take back a statement it has sent: PostgreSQL's
/// `statement_timeout` (the same deadline, counted from the statement's start) usually ends it just
/// after, and its transaction rolls back, so waiting that long keeps a 503 from hiding a commit. A
/// server that stopped answering (a partition, a frozen host) would answer only when TCP gives up,
/// minutes later, so the call does not wait longer. The timers are event-loop tasks: `Task.sleep`
/// would put a Dispatch timer and a second child task on every database call.
package func withDeadline<Result: Sendable>(
    _ timeout: Duration,
    settling: Duration = .seconds(1),
    expired expiredError: (@Sendable () -> any Error)? = nil,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let outcome = FirstOutcome<Result>()
    let expired = NIOLockedValueBox(false)
    let expiry: @Sendable () -> any Error = { expiredError?() ?? DatabaseUnavailable(reason: "no answer within \(timeout)") }
    let task = Task {
        do {
            outcome.settle(.success(try await operation()))
        } catch {
            outcome.settle(.failure(expired.withLockedValue { $0 } ? expiry() : error))
        }
    }
    let loop = MultiThreadedEventLoopGroup.singleton.any()
    let timer = loop.scheduleTask(in: .nanoseconds(Int64(timeout.seconds * 1e9))) {
        expired.withLockedValue { $0 = true }
        task.cancel()
        // Not cancelled on return: once the call has settled, settling again does nothing.
        loop.scheduleTask(in: .nanoseconds(Int64(settling.seconds * 1e9))) { outcome.settle(.failure(expiry())) }
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
        try await outcome.value()
    } onCancel: {
        task.cancel()
        outcome.settle(.failure(CancellationError()))
    }
}

/// The first of several outcomes (an operation's, a timer's, a cancellation's), for one waiter.
private final class FirstOutcome<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, any Error>)
        case settled(Swift.Result<Value, any Error>)
        case taken
    }

    private let state = NIOLockedValueBox(State.pending)

    func settle(_ result: Swift.Result<Value, any Error>) {
        let waiter: CheckedContinuation<Value, any Error>? = state.withLockedValue { state in
            switch state {
            case .pending:
                state = .settled(result)
                return nil
            case .waiting(let continuation):
                state = .taken
                return continuation
            case .settled, .taken:
                return nil
            }
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Swift.Result<Value, any Error>? = state.withLockedValue { state in
                guard case .settled(let result) = state else {
                    state = .waiting(continuation)
                    return nil
                }
                state = .taken
                return result
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

extension PostgresTransactionError {
    /// What broke the transaction: its body's error, else that of BEGIN, COMMIT or ROLLBACK.
    package var cause: (any Error)? { closureError ?? beginError ?? commitError ?? rollbackError }
}

/// A shared counter handing out 0, 1, 2, …
private final class Turns: Sendable {
    private let counter = Atomic<Int>(0)

    func next() -> Int {
        counter.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    }
}
