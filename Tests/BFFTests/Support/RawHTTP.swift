import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// HTTP/1.1 written byte for byte: the request target goes out exactly as given (`/api/./v1`,
/// `%2F`, `//`), which an HTTP client would normalise first.
enum RawHTTP {
    struct Answer {
        let status: Int
        let head: String
        let body: String
    }

    /// Sends `request` (a complete HTTP/1.1 message, `Connection: close` added) and reads the answer
    /// until the server closes.
    static func send(_ request: String, port: Int) async throws -> Answer {
        let received = NIOLockedValueBox(ByteBuffer())
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(received: received)) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        try await channel.closeFuture.get()
        let text = received.withLockedValue { String(buffer: $0) }
        let parts = text.split(separator: "\r\n\r\n", maxSplits: 1, omittingEmptySubsequences: false)
        let head = String(parts.first ?? "")
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return Answer(status: status, head: head, body: parts.count > 1 ? String(parts[1]) : "")
    }

    /// A request for `target` with `method`, the headers given and a JSON body when there is one.
    static func message(_ method: String, _ target: String, headers: [String] = [], body: String? = nil) -> String {
        var lines = ["\(method) \(target) HTTP/1.1", "Host: 127.0.0.1", "Connection: close"] + headers
        if let body {
            lines += ["Content-Type: application/json", "Content-Length: \(body.utf8.count)"]
        }
        return lines.joined(separator: "\r\n") + "\r\n\r\n" + (body ?? "")
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received: NIOLockedValueBox<ByteBuffer>

        init(received: NIOLockedValueBox<ByteBuffer>) { self.received = received }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            received.withLockedValue { _ = $0.writeBuffer(&buffer) }
        }
    }
}
