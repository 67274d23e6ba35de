import BFFWire
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Notification Hubs' direct send, checking the SAS token's HMAC against the hub's key, its resource,
/// expiry and key name, the format and device handle headers, and the platform payload.
public final class LocalNotificationHubs: Sendable {
    public struct Received: Sendable {
        public let format: String
        public let deviceHandle: String
        public let payload: String
    }

    public let keyName = "DefaultFullSharedAccessSignature"
    public let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    public let hub = "learnapp-hub"
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    private let attempts = AttemptCounter()

    /// `answer` decides each answer from the device handle and its attempt (1 for the first request).
    public init(answer: @escaping @Sendable (_ deviceHandle: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept }) {
        self.answer = answer
    }

    /// `BFF_NH_CONNECTION_STRING` for this hub at `base`.
    public func connectionString(base: String) -> String {
        "Endpoint=\(base.replacingOccurrences(of: "https://", with: "sb://"))/;SharedAccessKeyName=\(keyName);SharedAccessKey=\(key)"
    }

    private func refuse(_ status: Int, _ why: String) -> Response {
        violations.withLockedValue { $0.append(why) }
        return Response(status: .init(code: status))
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/:hub/messages") { [self] request, context -> Response in
            guard context.parameters.get("hub") == hub else { return refuse(404, "hub") }
            guard request.uri.queryParameters["api-version"] != nil, request.uri.query?.contains("direct") == true else {
                return refuse(400, "query")
            }
            // SharedAccessSignature sr=…&sig=…&se=…&skn=…
            guard let authorization = request.headers[.authorization], authorization.hasPrefix("SharedAccessSignature ") else {
                return refuse(401, "no SAS token")
            }
            var fields: [String: String] = [:]
            for pair in authorization.dropFirst("SharedAccessSignature ".count).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { fields[parts[0]] = parts[1] }
            }
            guard let resource = fields["sr"], let sig = fields["sig"]?.removingPercentEncoding, let expiry = fields["se"].flatMap(Int64.init),
                fields["skn"] == keyName, expiry > Int64(Date().timeIntervalSince1970),
                resource.removingPercentEncoding?.hasSuffix("/\(hub)") == true
            else { return refuse(401, "SAS fields") }
            let expected = HMAC<SHA256>.authenticationCode(for: Data("\(resource)\n\(expiry)".utf8), using: SymmetricKey(data: Data(key.utf8)))
            guard Data(expected).base64EncodedString() == sig else { return refuse(401, "SAS signature") }
            func field(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
            guard let format = field("ServiceBusNotification-Format"), ["apple", "fcmv1"].contains(format),
                let handle = field("ServiceBusNotification-DeviceHandle"), !handle.isEmpty
            else { return refuse(400, "format or device handle") }
            let body = String(buffer: try await request.body.collect(upTo: 1_000_000))
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return refuse(400, "payload") }
            if format == "apple" {
                guard (object["aps"] as? [String: Any])?["alert"] != nil, object["deep_link"] is String else { return refuse(400, "apple payload") }
            } else {
                guard let message = object["message"] as? [String: Any], message["token"] == nil, message["notification"] != nil,
                    (message["data"] as? [String: Any])?["deep_link"] is String
                else { return refuse(400, "fcmv1 payload") }
            }
            received.withLockedValue { $0.append(Received(format: format, deviceHandle: handle, payload: body)) }
            let attempt = attempts.next(handle)
            return try await scripted(answer(handle, attempt)) { Response(status: .created) }
        }
        return router
    }
}
