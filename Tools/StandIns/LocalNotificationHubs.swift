import BFFWire
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Notification Hubs' direct send as the REST reference documents it ("Direct send", "Send an APNS
/// native notification", "Send an FCM v1 native notification", "Common concepts"): an `api-version`
/// and `direct` in the query; a SAS token `SharedAccessSignature sr=…&sig=…&se=…&skn=…` whose
/// HMAC-SHA256 verifies with the hub's key, not expired, for this hub's URI; content type
/// `application/json;charset=utf-8`; `ServiceBusNotification-Format` apple or fcmv1 and a device
/// handle; then the platform's payload: an APNs object with an `aps` dictionary (and valid `apns-*`
/// headers), or an FCM v1 message without a target (`FCMMessageRules`).
public final class LocalNotificationHubs: Sendable {
    public struct Received: Sendable {
        public let format: String
        public let deviceHandle: String
        public let payload: String
    }

    /// The REST API's versions; a request naming another is refused.
    static let apiVersions: Set = ["2013-10", "2014-09", "2015-01", "2015-04", "2016-07", "2017-04", "2020-06", "2023-10-01"]

    public let keyName = "DefaultFullSharedAccessSignature"
    public let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    public let hub = "learnapp-hub"
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    let now: @Sendable () -> Date
    private let attempts = AttemptCounter()

    /// `answer` decides each answer from the device handle and its attempt (1 for the first request);
    /// `now` is the clock SAS tokens expire by.
    public init(
        answer: @escaping @Sendable (_ deviceHandle: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.answer = answer
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

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/:hub/messages") { [self] request, context -> Response in
            guard context.parameters.get("hub") == hub else { return refuse(404, "no such hub") }
            guard let version = request.uri.queryParameters["api-version"].map(String.init), Self.apiVersions.contains(version) else {
                return refuse(400, "api-version missing or unknown")
            }
            guard request.uri.queryParameters["direct"] != nil else { return refuse(400, "not a direct send (?direct)") }
            let requestURI = "https://\(request.head.authority ?? "")\(request.uri.path)"
            if let why = refusal(ofSAS: request.headers[.authorization], requestURI: requestURI) { return refuse(401, why) }
            func field(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
            guard mediaType(request.headers[.contentType]) == "application/json",
                (request.headers[.contentType] ?? "").lowercased().replacingOccurrences(of: " ", with: "").hasSuffix("charset=utf-8")
            else { return refuse(400, "content type is not application/json;charset=utf-8") }
            guard let format = field("ServiceBusNotification-Format")?.lowercased(), ["apple", "fcmv1"].contains(format) else {
                return refuse(400, "ServiceBusNotification-Format is not apple or fcmv1")
            }
            guard let handle = field("ServiceBusNotification-DeviceHandle"), !handle.isEmpty else {
                return refuse(400, "no ServiceBusNotification-DeviceHandle")
            }
            let bytes = try await request.body.collect(upTo: 1_000_000)
            guard bytes.readableBytes <= 64 * 1024 else { return refuse(413, "over 64 KB") }
            let body = String(buffer: bytes)
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
                return refuse(400, "the payload is no JSON object")
            }
            if format == "apple" {
                guard object["aps"] is [String: Any] else { return refuse(400, "apple payload without an aps dictionary") }
                if let pushType = field("apns-push-type"), !LocalAPNs.pushTypes.contains(pushType) { return refuse(400, "apns-push-type") }
                if let priority = field("apns-priority"), !["10", "5", "1"].contains(priority) { return refuse(400, "apns-priority") }
                if let collapse = field("apns-collapse-id"), collapse.utf8.count > 64 { return refuse(400, "apns-collapse-id over 64 bytes") }
                if let expiry = field("ServiceBusNotification-Apns-Expiry"), RFC3339.date(expiry) == nil {
                    return refuse(400, "ServiceBusNotification-Apns-Expiry is not a W3C date")
                }
            } else if let violation = FCMMessageRules.checkRequest(object, target: false) {
                return refuse(400, "fcmv1 payload: \(violation.field): \(violation.description)")
            }
            received.withLockedValue { $0.append(Received(format: format, deviceHandle: handle, payload: body)) }
            let attempt = attempts.next(handle)
            return try await scripted(answer(handle, attempt)) { Response(status: .created) }
        }
        return router
    }
}
