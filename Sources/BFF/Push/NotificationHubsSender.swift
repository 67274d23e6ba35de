import AsyncHTTPClient
import BFFPlatform
import BFFWire
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// Azure Notification Hubs' direct send (the requirements' route to APNs and FCM):
/// `POST {endpoint}/{hub}/messages/?direct&api-version=2023-10-01` with a SAS token made from the
/// connection string's key, the platform in `ServiceBusNotification-Format` (`apple`, `fcmv1`) and the
/// device's token in `ServiceBusNotification-DeviceHandle`. The hub answers 201 when it accepted a
/// push and says nothing of the device: a dead token is never reported here (see deploy/README.md).
struct NotificationHubsSender: PushSender {
    struct Connection: Sendable, Equatable {
        /// `https://{namespace}.servicebus.windows.net` (the connection string's `sb://` endpoint).
        let endpoint: String
        let keyName: String
        let key: String

        /// `Endpoint=sb://…/;SharedAccessKeyName=…;SharedAccessKey=…`, as the Azure portal gives it.
        init?(connectionString: String) {
            var fields: [String: String] = [:]
            for part in connectionString.split(separator: ";") {
                guard let equals = part.firstIndex(of: "=") else { continue }
                fields[part[..<equals].trimmingCharacters(in: .whitespaces).lowercased()] = String(part[part.index(after: equals)...])
            }
            guard let endpoint = fields["endpoint"], let keyName = fields["sharedaccesskeyname"], let key = fields["sharedaccesskey"],
                var url = URLComponents(string: endpoint), url.scheme == "sb" || url.scheme == "https", url.host != nil, !keyName.isEmpty, !key.isEmpty
            else { return nil }
            url.scheme = "https"
            url.path = ""
            guard let https = url.string else { return nil }
            self.endpoint = https
            self.keyName = keyName
            self.key = key
        }
    }

    static let apiVersion = "2023-10-01"

    let connection: Connection
    let hub: String
    let http: HTTPClient
    var now: @Sendable () -> Date = { Date() }
    var timeout: Duration = .seconds(10)

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        let resource = "\(connection.endpoint)/\(hub)"
        var request = HTTPClientRequest(url: "\(resource)/messages/?direct&api-version=\(Self.apiVersion)")
        request.method = .POST
        request.headers.add(name: "authorization", value: Self.sasToken(resource: resource, keyName: connection.keyName, key: connection.key, expiry: now().addingTimeInterval(600)))
        request.headers.add(name: "content-type", value: "application/json;charset=utf-8")
        request.headers.add(name: "servicebusnotification-devicehandle", value: target.token)
        if let refused = NotificationHubsSend.prepare(&request, message, platform: .init(target.provider)) { return refused }
        return await NotificationHubsSend.execute(
            request, http: http, timeout: timeout, span: "notification-hubs send", outcome: Self.outcome,
            unreachable: NotificationHubsSend.unreachable)
    }

    /// The hub's documented statuses. 201 is "accepted for the platform service", not "delivered".
    static func outcome(status: HTTPResponseStatus, headers: HTTPHeaders) -> PushOutcome {
        let retryAfter = headers.first(name: "retry-after").flatMap(Int.init).map { Duration.seconds($0) }
        let described = "\(status.code) from Notification Hubs"
        switch status.code {
        case 200, 201: return .sent
        case 400: return .payloadError(described)
        case 413: return .payloadError(described)
        // 403: the namespace's quota or the hub's throttling; it passes.
        case 403, 429, 500...599: return .retry(described, after: retryAfter)
        default: return .configurationError(described)
        }
    }

    /// A Shared Access Signature: HMAC-SHA256 with the key over the URL-encoded resource and the
    /// expiry, as Service Bus documents it.
    static func sasToken(resource: String, keyName: String, key: String, expiry: Date) -> String {
        let encoded = formEncoded(resource.lowercased())
        let seconds = Int64(expiry.timeIntervalSince1970)
        let signature = HMAC<SHA256>.authenticationCode(for: Data("\(encoded)\n\(seconds)".utf8), using: SymmetricKey(data: Data(key.utf8)))
        let sig = formEncoded(Data(signature).base64EncodedString())
        return "SharedAccessSignature sr=\(encoded)&sig=\(sig)&se=\(seconds)&skn=\(keyName)"
    }

    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
