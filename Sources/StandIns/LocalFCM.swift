import BFFWire
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import _CryptoExtras

/// FCM's HTTP v1 API and Google's OAuth token endpoint: the assertion's RS256 signature against the
/// service account's key, its claims and grant type; the access token on every send; the message's shape.
public final class LocalFCM: Sendable {
    public struct Received: Sendable {
        public let token: String
        public let message: String
    }

    /// The scope the assertion must ask for: FCM's.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    public let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    public let project = "learnapp-prod"
    public let clientEmail = "bff-push@learnapp-prod.iam.gserviceaccount.com"
    public let issued = NIOLockedValueBox<[String]>([])
    /// Access tokens refused with 401 UNAUTHENTICATED (revoked early).
    public let revoked = NIOLockedValueBox<Set<String>>([])
    public let tokenRequests = NIOLockedValueBox(0)
    /// Every message that passed the checks, unless made with `keepReceived: false`.
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    public let oauthAnswer = NIOLockedValueBox<ScriptedAnswer>(.accept)
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    let keepReceived: Bool
    let onAccepted: (@Sendable (AcceptedPush) -> Void)?
    private let attempts = AttemptCounter()

    /// `answer` decides each send's answer from the registration token and its attempt (1 for the
    /// first request); `onAccepted` sees every message answered 200.
    public init(
        answer: @escaping @Sendable (_ token: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        keepReceived: Bool = true, onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil
    ) {
        self.keepReceived = keepReceived
        self.onAccepted = onAccepted
        self.answer = answer
    }

    /// The service account's JSON key, naming this server's token endpoint (`base`/token), where
    /// `BFF_FCM_CREDENTIALS_FILE` can name it; returns its path.
    public func credentialsFile(in directory: String, base: String) throws -> String {
        let json: [String: String] = [
            "type": "service_account", "project_id": project, "private_key_id": "key-1", "private_key": key.pemRepresentation,
            "client_email": clientEmail, "token_uri": "\(base)/token",
        ]
        let path = "\(directory)/service-account.json"
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func error(_ status: Int, _ code: String, fcmCode: String? = nil, field: String? = nil) -> Response {
        var details: [String] = []
        if let fcmCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(fcmCode)"}"#) }
        if let field { details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)","description":"bad"}]}"#) }
        let body = #"{"error":{"code":\#(status),"message":"\#(code)","status":"\#(code)","details":[\#(details.joined(separator: ","))]}}"#
        return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/token") { [self] request, _ -> Response in
            tokenRequests.withLockedValue { $0 += 1 }
            let form = String(buffer: try await request.body.collect(upTo: 65536))
            let fields = Dictionary(
                form.split(separator: "&").map { pair -> (String, String) in
                    let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                    return (parts[0], parts.count > 1 ? parts[1] : "")
                }, uniquingKeysWith: { $1 })
            guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = fields["assertion"] else {
                violations.withLockedValue { $0.append("grant") }
                return Response(status: .badRequest)
            }
            let parts = assertion.split(separator: ".").map(String.init)
            guard parts.count == 3, let claimBytes = Base64URL.decode(parts[1]), let signatureBytes = Base64URL.decode(parts[2]),
                let header = Base64URL.decode(parts[0]).flatMap({ try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }),
                header["alg"] as? String == "RS256",
                let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any],
                claims["iss"] as? String == clientEmail, claims["scope"] as? String == Self.scope,
                (claims["aud"] as? String)?.hasSuffix("/token") == true,
                key.publicKey.isValidSignature(
                    _RSA.Signing.RSASignature(rawRepresentation: Data(signatureBytes)), for: Data("\(parts[0]).\(parts[1])".utf8),
                    padding: .insecurePKCS1v1_5)
            else {
                violations.withLockedValue { $0.append("assertion") }
                return Response(
                    status: .badRequest, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
            }
            let token = "ya29.local-\(UUID().uuidString)"
            return try await scripted(oauthAnswer.withLockedValue { $0 }) { [self] in
                issued.withLockedValue { $0.append(token) }
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)))
            }
        }
        router.post("/v1/projects/:project/messages:send") { [self] request, context -> Response in
            guard context.parameters.get("project") == project else { return error(404, "NOT_FOUND") }
            guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer "),
                issued.withLockedValue({ $0.contains(String(authorization.dropFirst(7))) }),
                !revoked.withLockedValue({ $0.contains(String(authorization.dropFirst(7))) })
            else { return error(401, "UNAUTHENTICATED") }
            let body = try await request.body.collect(upTo: 1_000_000)
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let message = object["message"] as? [String: Any], let token = message["token"] as? String,
                let notification = message["notification"] as? [String: Any], notification["title"] is String,
                let data = message["data"] as? [String: Any], data.values.allSatisfy({ $0 is String }), data["deep_link"] is String,
                let android = message["android"] as? [String: Any], android["priority"] as? String == "HIGH"
            else {
                violations.withLockedValue { $0.append("message") }
                return error(400, "INVALID_ARGUMENT")
            }
            if keepReceived { received.withLockedValue { $0.append(Received(token: token, message: String(buffer: body))) } }
            let attempt = attempts.next(token)
            let deepLink = data["deep_link"] as? String
            return try await scripted(answer(token, attempt)) { [onAccepted] in
                onAccepted?(AcceptedPush(service: "fcm", token: token, deepLink: deepLink))
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"name":"projects/\#(self.project)/messages/0:\#(UUID().uuidString)"}"#)))
            }
        }
        return router
    }
}

