import HummingbirdCore
import Logging
import Metrics

/// Caps the connections one process holds open (`BFF_HTTP_MAX_CONNECTIONS`): at the cap the server
/// stops accepting until one closes, so sockets that never finish a request cannot exhaust the
/// process's file descriptors and memory (each held about 13 KiB). Counted in
/// `bff_http_connections`; reaching the cap is logged once each time it is reached.
package struct ConnectionLimit: AvailableConnectionsDelegate {
    let maximum: Int
    let logger: Logger
    private var open = 0
    private var atCap = false
    private let gauge = Gauge(label: "bff_http_connections")
    private let refusals = Counter(label: "bff_http_connection_cap_reached_total")

    package init(maximum: Int, logger: Logger) {
        self.maximum = maximum
        self.logger = logger
    }

    package mutating func connectionOpened() {
        open += 1
        gauge.record(open)
        if open >= maximum, !atCap {
            atCap = true
            refusals.increment()
            logger.warning(
                "the connection cap is reached: new connections wait until one closes (BFF_HTTP_MAX_CONNECTIONS)",
                metadata: ["connections": .stringConvertible(open)])
        }
    }

    package mutating func connectionClosed() {
        open -= 1
        gauge.record(open)
        if atCap, open < maximum * 9 / 10 { atCap = false }
    }

    package func isAcceptingNewConnections() -> Bool { open < maximum }
}
