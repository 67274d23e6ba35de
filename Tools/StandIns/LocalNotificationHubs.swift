import BFFWire
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Notification Hubs as the REST reference documents it ("Create or overwrite an installation",
/// "Read an installation", "Delete an installation", "Direct send", "Send an APNS native
/// notification", "Send an FCM v1 native notification", "Routing and tag expressions", "Common
/// concepts"). Every request: a known `api-version`; a SAS token `SharedAccessSignature
/// sr=…&sig=…&se=…&skn=…` whose HMAC-SHA256 verifies with the hub's key, not expired, for this
/// hub's URI. Installations (PUT, GET, DELETE `/{hub}/installations/{id}`): `application/json`, the
/// members `NotificationHubsRules` checks, kept until deleted; a DELETE is 204 whether or not there
/// was one. Sends (POST `/{hub}/messages/`): `application/json;charset=utf-8`,
/// `ServiceBusNotification-Format` apple or fcmv1, then the platform's payload: an APNs object with
/// an `aps` dictionary (and valid `apns-*` headers), or an FCM v1 message without a target
/// (`FCMMessageRules`). A direct send (`?direct`) names a device handle; any other send names a tag
/// expression (a broadcast is refused: this server never means one) and is recorded with the
/// installations it reaches; one that reaches none is accepted all the same (201, delivered to
/// nobody), as the service answers it.
public final class LocalNotificationHubs: Sendable {
    /// A direct send.
    public struct Received: Sendable {
        public let format: String
        public let deviceHandle: String
        public let payload: String
    }

    /// An installation as the hub keeps it.
    public struct Installation: Sendable, Equatable {
        public let installationId: String
        /// Lowercased.
        public let platform: String
        public let pushChannel: String
        public let tags: [String]

        public init(installationId: String, platform: String, pushChannel: String, tags: [String]) {
            self.installationId = installationId
            self.platform = platform
            self.pushChannel = pushChannel
            self.tags = tags
        }
    }

    /// A send to a tag expression, and the installations it reaches.
    public struct TagSend: Sendable {
        public let format: String
        public let tags: String
        public let payload: String
        /// The ids of the installations of the format's platform that match the expression, sorted.
        public let reached: [String]
    }

    /// The REST API's versions; a request naming another is refused.
    static let apiVersions: Set = ["2013-10", "2014-09", "2015-01", "2015-04", "2016-07", "2017-04", "2020-06", "2023-10-01"]

    public let keyName = "DefaultFullSharedAccessSignature"
    public let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    public let hub = "learnapp-hub"
    /// Every direct send that passed the checks, unless made with `keepReceived: false`.
    public let received = NIOLockedValueBox<[Received]>([])
    public let installations = NIOLockedValueBox<[String: Installation]>([:])
    /// Every tag send that passed the checks, unless made with `keepReceived: false`.
    public let tagSends = NIOLockedValueBox<[TagSend]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    let operationAnswer: @Sendable (String, Int) -> ScriptedAnswer
    let now: @Sendable () -> Date
    let keepReceived: Bool
    let onAccepted: (@Sendable (AcceptedPush) -> Void)?
    private let attempts = AttemptCounter()
    private let operationAttempts = AttemptCounter()

    /// `answer` decides each direct send's answer from the device handle and its attempt (1 for the
    /// first request); `operation` every other request's, from `PUT installations/{id}`,
    /// `GET installations/{id}`, `DELETE installations/{id}` or `POST {format} tags {expression}` and its
    /// attempt. A request it refuses changes nothing. `keepReceived: false` keeps no send in `received`
    /// or `tagSends` (a benchmark's thousands of payloads); `onAccepted` sees every send answered 201,
    /// as `nh-apple` or `nh-fcmv1` with its tag expression (a direct send: its device handle) as the
    /// token. `now` is the clock SAS tokens expire by.
    public init(
        answer: @escaping @Sendable (_ deviceHandle: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        operation: @escaping @Sendable (_ operation: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        keepReceived: Bool = true, onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.answer = answer
        self.operationAnswer = operation
        self.keepReceived = keepReceived
        self.onAccepted = onAccepted
        self.now = now
    }

    /// `BFF_NH_CONNECTION_STRING` for this hub at `base`.
    public func connectionString(base: String) -> String {
        "Endpoint=\(base.replacingOccurrences(of: "https://", with: "sb://"))/;SharedAccessKeyName=\(keyName);SharedAccessKey=\(key)"
    }

    private func refuse(_ status: Int, _ why: String) -> Response {
        violations.withLockedValue { $0.append("\(status) \(why)") }
        return Response(status: .init(code: status))
    }

    /// Why the hub would refuse this SAS token for `requestURI` (https://host/hub/…), nil when it would not.
    func refusal(ofSAS authorization: String?, requestURI: String) -> String? {
        guard let authorization, authorization.hasPrefix("SharedAccessSignature ") else { return "no SharedAccessSignature" }
        var fields: [String: String] = [:]
        for pair in authorization.dropFirst("SharedAccessSignature ".count).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, fields[parts[0]] == nil else { return "the SAS token's fields are malformed" }
            fields[parts[0]] = parts[1]
        }
        guard let resource = fields["sr"], let sig = fields["sig"]?.removingPercentEncoding, let se = fields["se"], let keyName = fields["skn"]
        else { return "the SAS token lacks sr, sig, se or skn" }
        guard keyName == self.keyName else { return "skn names no key of this hub" }
        guard let expiry = Int64(se), se.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return "se is not whole seconds since the epoch" }
        guard expiry > Int64(now().timeIntervalSince1970) else { return "the SAS token expired" }
        // The signed URI covers the request's: the hub's own, or a prefix of it.
        guard let uri = resource.removingPercentEncoding?.lowercased(), requestURI.lowercased().hasPrefix(uri), uri.hasSuffix("/\(hub)") else {
            return "sr is not this hub's URI"
        }
        guard let given = Data(base64Encoded: sig),
            HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Data("\(resource)\n\(se)".utf8), using: SymmetricKey(data: Data(key.utf8)))
        else { return "the SAS signature does not verify" }
        return nil
    }

    /// What every request must get right first: this hub, a known `api-version`, a valid SAS token.
    private func admission(_ request: Request, _ context: BasicRequestContext) -> Response? {
        guard context.parameters.get("hub") == hub else { return refuse(404, "no such hub") }
        guard let version = request.uri.queryParameters["api-version"].map(String.init), Self.apiVersions.contains(version) else {
            return refuse(400, "api-version missing or unknown")
        }
        let requestURI = "https://\(request.head.authority ?? "")\(request.uri.path)"
        if let why = refusal(ofSAS: request.headers[.authorization], requestURI: requestURI) { return refuse(401, why) }
        return nil
    }

    private static func field(_ request: Request, _ name: String) -> String? {
        HTTPField.Name(name).flatMap { request.headers[$0] }
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.put("/:hub/installations/:id") { [self] request, context -> Response in
            if let refused = admission(request, context) { return refused }
            guard let id = context.parameters.get("id") else { return refuse(404, "no installation id") }
            let contentType = (request.headers[.contentType] ?? "").lowercased().replacingOccurrences(of: " ", with: "")
            guard mediaType(request.headers[.contentType]) == "application/json",
                !contentType.contains("charset=") || contentType.hasSuffix("charset=utf-8")
            else { return refuse(400, "content type is not application/json") }
            let bytes = try await request.body.collect(upTo: 1_000_000)
            guard let object = try? JSONSerialization.jsonObject(with: Data(String(buffer: bytes).utf8)) as? [String: Any] else {
                return refuse(400, "the installation is no JSON object")
            }
            if let why = NotificationHubsRules.installationViolation(object, id: id) { return refuse(400, "installation: \(why)") }
            let installation = Installation(
                installationId: id, platform: (object["platform"] as? String ?? "").lowercased(),
                pushChannel: object["pushChannel"] as? String ?? "", tags: (object["tags"] as? [Any] ?? []).compactMap { $0 as? String })
            let operation = "PUT installations/\(id)"
            return try await scripted(operationAnswer(operation, operationAttempts.next(operation))) { [installations] in
                let existed = installations.withLockedValue { stored in
                    let existed = stored[id] != nil
                    stored[id] = installation
                    return existed
                }
                return Response(status: existed ? .ok : .created)
            }
        }
        router.get("/:hub/installations/:id") { [self] request, context -> Response in
            if let refused = admission(request, context) { return refused }
            guard let id = context.parameters.get("id") else { return refuse(404, "no installation id") }
            let operation = "GET installations/\(id)"
            return try await scripted(operationAnswer(operation, operationAttempts.next(operation))) { [installations] in
                guard let installation = installations.withLockedValue({ $0[id] }) else { return Response(status: .notFound) }
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: LocalNotificationHubs.json(installation))))
            }
        }
        router.delete("/:hub/installations/:id") { [self] request, context -> Response in
            if let refused = admission(request, context) { return refused }
            guard let id = context.parameters.get("id") else { return refuse(404, "no installation id") }
            let operation = "DELETE installations/\(id)"
            return try await scripted(operationAnswer(operation, operationAttempts.next(operation))) { [installations] in
                // 204 whether or not it was there, as the reference says.
                installations.withLockedValue { _ = $0.removeValue(forKey: id) }
                return Response(status: .noContent)
            }
        }
        router.post("/:hub/messages") { [self] request, context -> Response in
            if let refused = admission(request, context) { return refused }
            guard mediaType(request.headers[.contentType]) == "application/json",
                (request.headers[.contentType] ?? "").lowercased().replacingOccurrences(of: " ", with: "").hasSuffix("charset=utf-8")
            else { return refuse(400, "content type is not application/json;charset=utf-8") }
            guard let format = LocalNotificationHubs.field(request, "ServiceBusNotification-Format")?.lowercased(), ["apple", "fcmv1"].contains(format) else {
                return refuse(400, "ServiceBusNotification-Format is not apple or fcmv1")
            }
            let direct = request.uri.queryParameters["direct"] != nil
            let handle = LocalNotificationHubs.field(request, "ServiceBusNotification-DeviceHandle")
            let tags = LocalNotificationHubs.field(request, "ServiceBusNotification-Tags")
            let clauses: [[String]]
            if direct {
                guard let handle, !handle.isEmpty else { return refuse(400, "no ServiceBusNotification-DeviceHandle") }
                clauses = []
            } else {
                guard handle == nil else { return refuse(400, "a device handle on a send that is not direct (?direct)") }
                guard let tags else { return refuse(400, "a broadcast: a send that is not direct names ServiceBusNotification-Tags here") }
                guard let parsed = NotificationHubsRules.clauses(tags) else {
                    return refuse(400, "ServiceBusNotification-Tags is no tag expression of at most 20 tags ORed or 6 with AND")
                }
                clauses = parsed
            }
            let bytes = try await request.body.collect(upTo: 1_000_000)
            guard bytes.readableBytes <= 64 * 1024 else { return refuse(413, "over 64 KB") }
            let body = String(buffer: bytes)
            if let why = LocalNotificationHubs.payloadViolation(request, format: format, body: body) { return refuse(400, why) }
            let deepLink = onAccepted == nil ? nil : LocalNotificationHubs.deepLink(format: format, body: body)
            if direct, let handle {
                if keepReceived { received.withLockedValue { $0.append(Received(format: format, deviceHandle: handle, payload: body)) } }
                return try await scripted(answer(handle, attempts.next(handle))) { [onAccepted] in
                    onAccepted?(AcceptedPush(service: "nh-\(format)", token: handle, deepLink: deepLink))
                    return Response(status: .created)
                }
            }
            let expression = tags ?? ""
            let operation = "POST \(format) tags \(expression)"
            return try await scripted(operationAnswer(operation, operationAttempts.next(operation))) { [installations, tagSends, keepReceived, onAccepted] in
                let platform = NotificationHubsRules.platform(ofFormat: format)
                let reached = installations.withLockedValue { stored in
                    stored.values.filter { $0.platform == platform && NotificationHubsRules.matches(clauses, tags: $0.tags) }.map(\.installationId).sorted()
                }
                if keepReceived { tagSends.withLockedValue { $0.append(TagSend(format: format, tags: expression, payload: body, reached: reached)) } }
                // Reaching no installation is still a send the hub accepted.
                onAccepted?(AcceptedPush(service: "nh-\(format)", token: expression, deepLink: deepLink))
                return Response(status: .created)
            }
        }
        return router
    }

    /// Why the hub (or the platform behind it) would refuse this payload in `format`.
    private static func payloadViolation(_ request: Request, format: String, body: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
            return "the payload is no JSON object"
        }
        if format == "apple" {
            guard object["aps"] is [String: Any] else { return "apple payload without an aps dictionary" }
            if let pushType = field(request, "apns-push-type"), !LocalAPNs.pushTypes.contains(pushType) { return "apns-push-type" }
            if let priority = field(request, "apns-priority"), !["10", "5", "1"].contains(priority) { return "apns-priority" }
            if let collapse = field(request, "apns-collapse-id"), collapse.utf8.count > 64 { return "apns-collapse-id over 64 bytes" }
            if let expiry = field(request, "ServiceBusNotification-Apns-Expiry"), RFC3339.date(expiry) == nil {
                return "ServiceBusNotification-Apns-Expiry is not a W3C date"
            }
        } else if let violation = FCMMessageRules.checkRequest(object, target: false) {
            return "fcmv1 payload: \(violation.field): \(violation.description)"
        }
        return nil
    }

    /// The deep link a send's payload carries: beside `aps` for apple, in the message's `data` for fcmv1.
    private static func deepLink(format: String, body: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return nil }
        if format == "apple" { return object["deep_link"] as? String }
        return ((object["message"] as? [String: Any])?["data"] as? [String: Any])?["deep_link"] as? String
    }

    /// An installation as GET answers it.
    static func json(_ installation: Installation) -> String {
        let object: [String: Any] = [
            "installationId": installation.installationId, "platform": installation.platform, "pushChannel": installation.pushChannel,
            "tags": installation.tags, "expiredPushChannel": false,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
