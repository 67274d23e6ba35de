import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// How a local push service answers one request.
public enum ScriptedAnswer: Sendable {
    case accept
    case refuse(status: Int, reason: String, retryAfter: Int? = nil)
    /// A body that is no JSON at all.
    case garbage(status: Int)
    /// Waits this long before answering as `accept` would (a client with a shorter timeout gives up;
    /// the benchmark's services answer this way after their latency).
    case stall(Duration)
    /// Breaks the response off: the client sees the stream or connection reset.
    case drop

    public var isStall: Bool {
        if case .stall = self { return true }
        return false
    }
}

/// The response `answer` calls for; `accepted` builds the service's success.
func scripted(_ answer: ScriptedAnswer, accepted: @escaping @Sendable () -> Response) async throws -> Response {
    switch answer {
    case .accept:
        return accepted()
    case .refuse(let status, let reason, let retryAfter):
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: reason)))
    case .garbage(let status):
        return Response(status: .init(code: status), headers: [.contentType: "text/html"], body: .init(byteBuffer: ByteBuffer(string: "<html>Bad Gateway</html>")))
    case .stall(let duration):
        try? await Task.sleep(for: duration)
        return accepted()
    case .drop:
        struct Dropped: Error {}
        return Response(
            status: .ok,
            body: .init { writer in
                try await writer.write(ByteBuffer(string: "{"))
                throw Dropped()
            })
    }
}

/// What a stand-in accepted, for a caller that watches deliveries as they come (the benchmark's log).
public struct AcceptedPush: Sendable {
    /// `apns`, `fcm`, or the hub's `nh-apple` or `nh-fcmv1` (its send formats).
    public let service: String
    /// The device token; for a hub's tag send, its tag expression.
    public let token: String
    public let deepLink: String?
}

/// Counts requests per device token, so a scripted answer can depend on the attempt.
final class AttemptCounter: Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])

    func next(_ token: String) -> Int {
        counts.withLockedValue { counts in
            counts[token, default: 0] += 1
            return counts[token]!
        }
    }
}
