import BFFPlatform
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// The worker's LISTEN on `JobQueue.channel`, on a connection of its own (outside the database's
/// pools): each NOTIFY names a kind and rings the worker's `Doorbell`; the claim loop takes the
/// kinds named since it last looked.
final class JobNotifier: Sendable {
    private let databaseURL: DatabaseURL
    /// The kinds the worker runs: after a (re)connection, any of them may have jobs.
    private let kinds: [String]
    private let pollInterval: Duration
    private let doorbell: Doorbell
    private let logger: Logger
    /// The connection's own logger (the database's).
    private let connectionLogger: Logger
    /// Kinds named by NOTIFYs since the claim loop last looked (the payload is the kind).
    private let notified = NIOLockedValueBox<Set<String>>([])
    private let listener = NIOLockedValueBox<PostgresConnection?>(nil)

    init(databaseURL: DatabaseURL, kinds: [String], pollInterval: Duration, doorbell: Doorbell, logger: Logger, connectionLogger: Logger) {
        self.databaseURL = databaseURL
        self.kinds = kinds
        self.pollInterval = pollInterval
        self.doorbell = doorbell
        self.logger = logger
        self.connectionLogger = connectionLogger
    }

    /// The kinds notified since the last call.
    func takeNotified() -> Set<String> {
        notified.withLockedValue { named in
            defer { named = [] }
            return named
        }
    }

    /// LISTENs for enqueued jobs on a connection of its own, reconnecting after a failure (the
    /// database restarting): until it is back, the poll interval bounds the delay. Reconnection is
    /// tried after half a second, then ever less often up to 5 s (or the poll interval, if shorter),
    /// so that notifications return within seconds of the database, however long the poll interval.
    /// Returns once `isStopping` (the worker's) holds between two connections; `close()` ends the
    /// current one.
    func listen(until isStopping: () -> Bool) async {
        var failures = 0
        while !isStopping() {
            var failure: (any Error)?
            do {
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.any(), configuration: try databaseURL.connectionConfiguration(),
                    id: 0, logger: connectionLogger)
                listener.withLockedValue { $0 = connection }
                if !isStopping() {
                    do {
                        try await connection.listen(on: JobQueue.channel) { notifications in
                            failures = 0
                            // Jobs enqueued while no one listened are found by the next claim.
                            notified.withLockedValue { $0.formUnion(kinds) }
                            doorbell.ring()
                            for try await notification in notifications {
                                notified.withLockedValue { _ = $0.insert(notification.payload) }
                                doorbell.ring()
                            }
                        }
                    } catch {
                        failure = error
                    }
                }
                listener.withLockedValue { $0 = nil }
                // Awaited: a connection must be closed before it is released.
                try? await connection.close()
            } catch {
                failure = error
            }
            if isStopping() { return }
            if let failure {
                logger.notice("job notifications unavailable, polling until they are back", metadata: ["error": .string(LoggableError.describe(failure))])
            }
            let retry = Duration.milliseconds(500) * (1 << min(failures, 4))
            failures += 1
            try? await Task.sleep(for: min(retry, .seconds(5), pollInterval))
        }
    }

    /// Ends the LISTEN (at shutdown): `listen(until:)` then closes the connection.
    func close() {
        let connection = listener.withLockedValue { $0 }
        let _: EventLoopFuture<Void>? = connection?.close()
    }
}
