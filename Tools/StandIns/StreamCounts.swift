import NIOConcurrencyHelpers
import NIOCore

/// How many requests a stand-in served at once on one connection: per connection, the most requests
/// in flight together, and how many connections it has seen. With HTTP/2 a request is a stream, and
/// each stream is a child channel of its connection's channel: `handler()` goes into every stream's
/// pipeline (`serveStandIn(…, streams:)`), and counts the stream from its set-up to its channel's
/// close (the request's HEADERS until the response's END_STREAM, or a reset), under its parent's
/// identity. An HTTP/1.1 connection (the fallback when a client does not offer h2) has no streams:
/// the handler sits in the connection's own pipeline and counts it as one request for its life.
public final class StreamCounts: Sendable {
    /// What the counts say so far.
    public struct Figures: Sendable, Equatable {
        /// The most requests in flight at once on any one connection.
        public let maxInFlight: Int
        /// The connections seen, open or closed.
        public let connections: Int
    }

    private struct Connection: Sendable {
        /// Its place among the connections seen, an index of `peaks`.
        let serial: Int
        var inFlight: Int
    }

    private struct State: Sendable {
        /// The connections open now, by their channel's identity (dropped when the channel closes, so a
        /// later channel at the same address is a new connection).
        var open: [ObjectIdentifier: Connection] = [:]
        /// The most requests in flight at once on each connection seen, in the order seen.
        var peaks: [Int] = []
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    public var figures: Figures {
        state.withLockedValue { Figures(maxInFlight: $0.peaks.max() ?? 0, connections: $0.peaks.count) }
    }

    /// Per connection seen, in order: the most requests it had in flight at once.
    public var peaks: [Int] { state.withLockedValue { $0.peaks } }

    /// A new counting handler, for one stream's (or one HTTP/1.1 connection's) pipeline.
    func handler() -> any RemovableChannelHandler { StreamCountHandler(counts: self) }

    /// A request began on `connection`; true when the connection was not open before.
    fileprivate func began(on connection: ObjectIdentifier) -> Bool {
        state.withLockedValue { state in
            var isNew = false
            if state.open[connection] == nil {
                state.open[connection] = Connection(serial: state.peaks.count, inFlight: 0)
                state.peaks.append(0)
                isNew = true
            }
            state.open[connection]!.inFlight += 1
            let current = state.open[connection]!
            state.peaks[current.serial] = max(state.peaks[current.serial], current.inFlight)
            return isNew
        }
    }

    /// A request on `connection` ended (its stream's channel closed).
    fileprivate func ended(on connection: ObjectIdentifier) {
        state.withLockedValue { state in
            // Absent when the connection's close was seen first: nothing is in flight on it any more.
            guard state.open[connection] != nil else { return }
            state.open[connection]!.inFlight -= 1
        }
    }

    /// `connection` closed: a channel made later at the same address is another connection.
    fileprivate func closed(_ connection: ObjectIdentifier) {
        state.withLockedValue { _ = $0.open.removeValue(forKey: connection) }
    }
}

/// Counts its channel as one request in flight on the channel's connection until the channel closes.
/// NIO takes only inbound or outbound handlers into a pipeline: it is an inbound one whose reads
/// pass on untouched (the default `channelRead`), so `InboundIn` is never unwrapped.
private final class StreamCountHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    let counts: StreamCounts

    init(counts: StreamCounts) {
        self.counts = counts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        // An HTTP/2 stream's parent is its connection, whose parent is the listening socket; an
        // HTTP/1.1 connection's parent is the listening socket, so it stands for itself.
        let connection: any Channel
        if let parent = channel.parent, parent.parent != nil {
            connection = parent
        } else {
            connection = channel
        }
        let key = ObjectIdentifier(connection)
        let counts = self.counts
        if counts.began(on: key) {
            connection.closeFuture.whenComplete { _ in counts.closed(key) }
        }
        channel.closeFuture.whenComplete { _ in counts.ended(on: key) }
    }
}
