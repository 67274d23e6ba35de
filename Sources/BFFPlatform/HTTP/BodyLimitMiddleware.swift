import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Reads the request body, capped (64 KiB by default) and bounded in time. It runs after
/// authentication, the webhook credential and the rate limits, so a request refused by them costs
/// no buffer: a declared length over the cap is refused before reading, a streamed body is read at
/// most up to the cap, and a body that stalls longer than `BFF_BODY_READ_TIMEOUT` closes the
/// connection without an answer.
package struct BodyLimitMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    let limit: Int
    let readTimeout: Duration
    let logger: Logger

    package init(limit: Int, readTimeout: Duration, logger: Logger) {
        self.limit = limit
        self.readTimeout = readTimeout
        self.logger = logger
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw APIError.payloadTooLarge
        }
        guard request.method != .get, request.method != .head else {
            return try await next(request, context)
        }
        // A timer on the connection's event loop rather than a racing task: this runs on every write
        // request, and closing the channel is what ends a stalled read anyway.
        let stalled = NIOLockedValueBox(false)
        let channel = context.channel
        let timer = channel.eventLoop.scheduleTask(in: .nanoseconds(readTimeout.nanoseconds)) {
            stalled.withLockedValue { $0 = true }
            channel.close(promise: nil)
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: limit)
            timer.cancel()
        } catch is NIOTooManyBytesError {
            // What a chunked body longer than the cap throws; only a declared length is checked above.
            timer.cancel()
            throw APIError.payloadTooLarge
        } catch {
            timer.cancel()
            if stalled.withLockedValue({ $0 }) { return stalledAnswer() }
            throw error
        }
        // A stream ended by the closed channel reads as a complete (short) body.
        if stalled.withLockedValue({ $0 }) { return stalledAnswer() }
        context.bodyRead?.markRead()
        return try await next(request, context)
    }

    /// The connection is closed already: this answer is never written, it only names the request in
    /// the log and the metrics.
    private func stalledAnswer() -> Response {
        logger.warning(
            "request body stalled; connection closed without an answer",
            metadata: ["timeout_seconds": .stringConvertible(readTimeout.seconds)])
        return Response(status: .requestTimeout, headers: [.connection: "close"])
    }
}

/// Whether a request's body has been read, shared between the step that reads it and the one that
/// sees the answer (`UnreadBodyMiddleware`). Made only for a request that has a body.
package final class BodyReadMark: Sendable {
    private let read = NIOLockedValueBox(false)
    func markRead() { read.withLockedValue { $0 = true } }
    var isRead: Bool { read.withLockedValue { $0 } }
}

/// An answer given before the request's body was read (a 401, 404, 413, 429 or 503 refusal) carries
/// `Connection: close`, and the connection closes once it is written: the server never drains a body
/// it has refused, so a client cannot hold a connection and a buffer by sending one slowly.
package struct UnreadBodyMiddleware<Context: PlatformRequestContext>: RouterMiddleware {
    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.hasBody(request) else { return try await next(request, context) }
        var context = context
        let mark = BodyReadMark()
        context.bodyRead = mark
        var response = try await next(request, context)
        if !mark.isRead {
            response.headers[.connection] = "close"
            // Hummingbird's connection handler closes after the answer's end is written when told to
            // quiesce while a request is in progress, instead of reading the rest of the body.
            context.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
        return response
    }

    static func hasBody(_ request: Request) -> Bool {
        if request.headers[.transferEncoding] != nil { return true }
        guard let length = request.headers[.contentLength] else { return false }
        return length != "0"
    }
}
