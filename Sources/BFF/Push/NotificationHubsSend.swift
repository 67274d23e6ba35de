import AsyncHTTPClient
import BFFPlatform
import BFFWire
import NIOCore
import NIOHTTP1

/// What a send to Notification Hubs carries and how its answer is read, for the per-device send
/// (`NotificationHubsSender`, left to the previous release's jobs) and the tag send
/// (`NotificationHubsClient.sendRecall`) alike.
enum NotificationHubsSend {
    /// Adds `platform`'s format and, for `apple`, APNs' own headers to `request`, and sets the direct
    /// route's payload as its body: APNs' for `apple`, the FCM v1 message without a token (the hub
    /// fills in each device's) for `fcmv1`. A payload error when it is over the platform services'
    /// 4 KB: the hub would pass it on, to be refused per device.
    static func prepare(_ request: inout HTTPClientRequest, _ message: PushMessage, platform: NotificationHubsClient.Platform) -> PushOutcome? {
        request.headers.add(name: "servicebusnotification-format", value: platform.format)
        let payload: ByteBuffer
        switch platform {
        case .apns:
            request.headers.add(name: "apns-push-type", value: "alert")
            request.headers.add(name: "apns-priority", value: "10")
            request.headers.add(name: "apns-collapse-id", value: message.collapseID)
            request.headers.add(name: "servicebusnotification-apns-expiry", value: RFC3339.string(message.expiresAt) ?? "")
            payload = APNsSender.payload(message)
        case .fcmv1:
            payload = FCMSender.payload(message, token: nil)
        }
        guard payload.readableBytes <= 4096 else { return .payloadError("the payload is \(payload.readableBytes) bytes, over 4096") }
        request.body = .bytes(payload)
        return nil
    }

    /// Sends `request` and reads the hub's answer with `outcome`; a timeout, a dropped connection or
    /// an unreachable hub is `unreachable`'s, with the error described. Never throws.
    static func execute<Outcome>(
        _ request: HTTPClientRequest, http: HTTPClient, timeout: Duration, span: String,
        outcome: (HTTPResponseStatus, HTTPHeaders) -> Outcome, unreachable: (String) -> Outcome
    ) async -> Outcome {
        do {
            let response = try await http.execute(request, timeout: .seconds(Int64(timeout.components.seconds)), span: span)
            _ = try await response.body.collect(upTo: 64 * 1024)
            return outcome(response.status, response.headers)
        } catch {
            return unreachable(LoggableError.describe(error))
        }
    }

    /// A send's answer when the hub could not be reached: a retry.
    static func unreachable(_ described: String) -> PushOutcome {
        .retry("Notification Hubs unreachable: \(described)", after: nil)
    }
}
