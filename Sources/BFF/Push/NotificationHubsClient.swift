import AsyncHTTPClient
import BFFPlatform
import BFFWire
import Foundation
import NIOCore
import NIOHTTP1

/// Azure Notification Hubs' installations and tag sends (`BFF_PUSH_ROUTE=notification-hubs`), on
/// the REST API of `NotificationHubsSender.apiVersion` with the same SAS tokens as the direct send:
///
/// - `PUT {endpoint}/{hub}/installations/{device_id}`: creates or overwrites the device's one
///   installation (`application/json`; 200, or 201 for a new one). A device's new token overwrites
///   its old one, because the installation is keyed by the device, not by the token.
/// - `DELETE {endpoint}/{hub}/installations/{device_id}`: 204, also when there was none.
/// - `POST {endpoint}/{hub}/messages/` with `ServiceBusNotification-Tags: user:{user_id}`: one send
///   reaches every installation of the learner on the format's platform (201).
///
/// The hub tells the platform services' answers to no one here: it drops a handle that APNs or
/// FCM calls dead by itself, so this route never deletes a token on a send's answer.
struct NotificationHubsClient: Sendable {
    /// One device as the hub keeps it.
    struct Installation: Sendable, Equatable {
        /// The device's id: `installationId`, and the last segment of the installation's URL.
        let id: String
        let platform: Platform
        /// The device's APNs or FCM token.
        let pushChannel: String
        let tags: [String]
    }

    /// The installation platforms, and send formats, this server uses.
    enum Platform: String, Sendable, CaseIterable {
        case apns
        // FCM v1 is the hub's Firebase platform; an iOS app that registers FCM tokens is on it too.
        case fcmv1

        init(_ provider: PushTokenRegistration.Provider) {
            self = provider == .apns ? .apns : .fcmv1
        }

        /// `ServiceBusNotification-Format` of a send to this platform's installations.
        var format: String { self == .apns ? "apple" : "fcmv1" }
    }

    /// What the hub made of a PUT or DELETE of an installation.
    enum InstallationOutcome: Sendable, Equatable {
        /// The hub holds what was asked (for a DELETE: no installation, whether or not there was one).
        case applied
        /// Try again, not before `after` when the hub said so.
        case retry(String, after: Duration?)
        /// Our key or the hub's name is refused: no retry helps until an operator fixes them.
        case configurationError(String)
        /// The hub refuses this installation's content: no retry helps.
        case refused(String)
    }

    let connection: NotificationHubsSender.Connection
    let hub: String
    let http: HTTPClient
    var now: @Sendable () -> Date = { Date() }
    var timeout: Duration = .seconds(10)

    /// The one tag of a learner's installations.
    static func userTag(_ userID: UUID) -> String {
        "user:\(userID.uuidString.lowercased())"
    }

    /// The installation of `deviceID` holding `token` of `provider` for `userID`.
    static func installation(deviceID: String, userID: UUID, token: String, provider: PushTokenRegistration.Provider) -> Installation {
        Installation(id: deviceID, platform: Platform(provider), pushChannel: token, tags: [userTag(userID)])
    }

    private var resource: String { "\(connection.endpoint)/\(hub)" }

    /// A request to `path` under the hub, signed; device ids are 8-128 characters of A-Z a-z 0-9
    /// . _ : - (`AuthService.validDeviceID`), every one of them allowed in a path segment as it is.
    private func signedRequest(_ method: HTTPMethod, _ path: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: "\(resource)/\(path)?api-version=\(NotificationHubsSender.apiVersion)")
        request.method = method
        request.headers.add(
            name: "authorization",
            value: NotificationHubsSender.sasToken(
                resource: resource, keyName: connection.keyName, key: connection.key, expiry: now().addingTimeInterval(600)))
        return request
    }

    /// Creates or overwrites `installation`.
    func put(_ installation: Installation) async -> InstallationOutcome {
        var request = signedRequest(.PUT, "installations/\(installation.id)")
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(Self.body(installation))
        return await installationCall(request, what: "PUT installation")
    }

    /// Deletes the installation of `deviceID`; one that is not there is deleted already.
    func deleteInstallation(_ deviceID: String) async -> InstallationOutcome {
        await installationCall(signedRequest(.DELETE, "installations/\(deviceID)"), what: "DELETE installation")
    }

    private func installationCall(_ request: HTTPClientRequest, what: String) async -> InstallationOutcome {
        await NotificationHubsSend.execute(
            request, http: http, timeout: timeout, span: "notification-hubs installation",
            outcome: { Self.installationOutcome(method: request.method, status: $0, headers: $1) },
            unreachable: { .retry("Notification Hubs unreachable (\(what)): \($0)", after: nil) })
    }

    /// The hub's documented statuses for installations. 403 is documented as "quota exceeded: the
    /// rate of registration operations is too high", which passes; 404 to a DELETE is the absence
    /// the DELETE asked for, to a PUT a hub that is not there.
    static func installationOutcome(method: HTTPMethod, status: HTTPResponseStatus, headers: HTTPHeaders) -> InstallationOutcome {
        let described = "\(status.code) from Notification Hubs (\(method.rawValue) installation)"
        switch status.code {
        case 200, 201, 204: return .applied
        case 404 where method == .DELETE: return .applied
        case 400, 413: return .refused(described)
        case 403, 429, 500...599: return .retry(described, after: RetryAfter.parse(headers))
        default: return .configurationError(described)
        }
    }

    /// `{"installationId":…,"platform":…,"pushChannel":…,"tags":[…]}`: nothing else, so that an
    /// overwrite leaves no field of an older installation behind.
    static func body(_ installation: Installation) -> ByteBuffer {
        var writer = JSONWriter(capacity: 256 + installation.pushChannel.utf8.count)
        writer.raw(#"{"installationId":"#)
        writer.string(installation.id)
        writer.raw(#","platform":"#)
        writer.string(installation.platform.rawValue)
        writer.raw(#","pushChannel":"#)
        writer.string(installation.pushChannel)
        writer.raw(#","tags":["#)
        for (index, tag) in installation.tags.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.string(tag)
        }
        writer.raw("]}")
        return writer.buffer
    }

    /// Delivers a recall to every installation of `userID` on `platform`, by the learner's tag.
    ///
    /// The contract, for the recall's delivery:
    /// - One call per recall and platform. Call it once for each platform among the learner's push
    ///   tokens at delivery (the delivery takes them from its read: `HubTagSend.units`), `.apns` for APNs tokens and
    ///   `.fcmv1` for FCM tokens, whichever OS registered them; a platform with no installation
    ///   reaches no one and is still answered 201.
    /// - The payloads are the direct route's: APNs' (`APNsSender.payload`) in the `apple` format with
    ///   `apns-push-type`, `apns-priority`, `apns-collapse-id` and the expiry as headers, and the FCM v1
    ///   message without a token (`FCMSender.payload(_:token: nil)`) in `fcmv1`. `message.collapseID`
    ///   must be the recall's id: it is `apns-collapse-id` and the FCM `collapse_key`, so that a send
    ///   made again replaces the shown notification instead of adding a second.
    /// - The outcome is the send's, not any device's: `.sent` when the hub accepted it (it may
    ///   still reach no device), `.retry` on 403 (quota), 429, 5xx, a timeout or an unreachable hub,
    ///   with `Retry-After` when given, `.payloadError` on 400 and 413, `.configurationError` on 401,
    ///   404 (no such hub) and anything else. Never `.tokenDead`: the hub prunes dead handles itself.
    /// - A retry sends to every installation of the platform again; the collapse id keeps a device
    ///   that had it from showing it twice.
    /// - Never throws, and logs nothing: the caller logs the outcome, never the SAS token.
    func sendRecall(_ message: PushMessage, toUser userID: UUID, platform: Platform) async -> PushOutcome {
        var request = signedRequest(.POST, "messages/")
        request.headers.add(name: "content-type", value: "application/json;charset=utf-8")
        request.headers.add(name: "servicebusnotification-tags", value: Self.userTag(userID))
        if let refused = NotificationHubsSend.prepare(&request, message, platform: platform) { return refused }
        return await NotificationHubsSend.execute(
            request, http: http, timeout: timeout, span: "notification-hubs tag send", outcome: Self.sendOutcome,
            unreachable: NotificationHubsSend.unreachable)
    }

    /// The hub's documented statuses for a send: 200 or 201 accepted, 400 malformed, 401 our key,
    /// 403 quota exceeded, 404 no such hub, 413 over 64 KB, 429 throttled.
    static func sendOutcome(status: HTTPResponseStatus, headers: HTTPHeaders) -> PushOutcome {
        let described = "\(status.code) from Notification Hubs (tag send)"
        switch status.code {
        case 200, 201: return .sent
        case 400, 413: return .payloadError(described)
        case 403, 429, 500...599: return .retry(described, after: RetryAfter.parse(headers))
        default: return .configurationError(described)
        }
    }
}
