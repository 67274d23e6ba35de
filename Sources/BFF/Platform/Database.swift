import Logging
import Metrics
import NIOConcurrencyHelpers
import PostgresNIO

/// The database could not be reached in time: the request is answered 503 `database_unavailable`.
struct DatabaseUnavailable: Error, CustomStringConvertible {
    let reason: String
    var description: String { "database unavailable: \(reason)" }
}

/// The server's one `PostgresClient`, with a deadline on every use so that a dead database turns into
/// fast 503s instead of requests queueing behind the pool's reconnect back-off.
public struct Database: Sendable {
    public let client: PostgresClient
    public let logger: Logger
    let timeout: Duration
    private let leases: Gauge
    private let leasesInFlight: NIOLockedValueBox<Int>

    public init(client: PostgresClient, timeout: Duration = .seconds(5), poolSize: Int = 20,
                logger: Logger = Logger(label: "bff.database")) {
        self.client = client
        self.logger = logger
        self.timeout = timeout
        self.leases = Gauge(label: "bff_db_pool_leases_in_use")
        self.leasesInFlight = .init(0)
        Gauge(label: "bff_db_pool_max_connections").record(poolSize)
    }

    /// Runs `body` against the pool within the deadline; connection-level failures become `DatabaseUnavailable`.
    public func run<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        track(+1)
        defer { track(-1) }
        do {
            return try await withDeadline(timeout) { try await body(client) }
        } catch {
            throw Self.classify(error)
        }
    }

    /// Connection-level failures become `DatabaseUnavailable`; a transaction's wrapper gives way to the
    /// error that broke it, so an `APIError` thrown inside a transaction reaches the client as itself.
    static func classify(_ error: any Error) -> any Error {
        switch error {
        case let error as PostgresTransactionError:
            return classify(error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError ?? error)
        case let error as PSQLError where isConnectionFailure(error):
            return DatabaseUnavailable(reason: "\(error.code)")
        case _ where String(describing: type(of: error)) == "ConnectionPoolError":
            // The pool's own error type is not public API; it only ever means "no connection".
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

/// Races `operation` against a timer; the loser is cancelled.
func withDeadline<Result: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw DatabaseUnavailable(reason: "no answer within \(timeout)")
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() else { throw CancellationError() }
        return result
    }
}
