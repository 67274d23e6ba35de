import BFFWire
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// APNs as Apple documents it, checking what it receives the way APNs does: the provider token's
/// ES256 signature against the team's key, its `kid` and `iss`, the topic, push type, priority,
/// expiration and collapse id headers, and a JSON payload of at most 4 KB with an alert.
public final class LocalAPNs: Sendable {
    public struct Received: Sendable {
        public let deviceToken: String
        public let providerToken: String
        public let issuedAt: Int64
        public let headers: [String: String]
        public let payload: [String: any Sendable]
    }

    public let key = P256.Signing.PrivateKey()
    public let keyID = "ABC123DEFG"
    public let teamID = "TEAM123456"
    public let topic = "jp.example.learnapp"
    /// Provider tokens this server calls stale (answering 403 ExpiredProviderToken).
    public let expiredProviderTokens = NIOLockedValueBox<Set<String>>([])
    /// Every request that passed the checks, unless made with `keepReceived: false`.
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    let keepReceived: Bool
    let onAccepted: (@Sendable (AcceptedPush) -> Void)?
    private let attempts = AttemptCounter()

    /// `answer` decides each answer from the device token and its attempt (1 for the first request);
    /// `onAccepted` sees every push answered 200.
    public init(
        answer: @escaping @Sendable (_ deviceToken: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        keepReceived: Bool = true, onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil
    ) {
        self.keepReceived = keepReceived
        self.onAccepted = onAccepted
        self.answer = answer
    }

    /// Writes the team's signing key where `BFF_APNS_KEY_FILE` can name it; returns its path.
    public func keyFile(in directory: String) throws -> String {
        let path = "\(directory)/AuthKey_\(keyID).p8"
        try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func refuse(_ status: Int, _ reason: String) -> Response {
        violations.withLockedValue { $0.append("\(status) \(reason)") }
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"\#(reason)"}"#)))
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/3/device/:token") { [self] request, context -> Response in
            let deviceToken = context.parameters.get("token") ?? ""
            let body = try await request.body.collect(upTo: 1_000_000)
            // The provider token: ES256 over header.claims, with this key id and team.
            guard let authorization = request.headers[.authorization], authorization.hasPrefix("bearer ") else {
                return refuse(403, "MissingProviderToken")
            }
            let jwt = String(authorization.dropFirst("bearer ".count))
            let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
                let signatureBytes = Base64URL.decode(parts[2]),
                let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
                let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any],
                header["alg"] as? String == "ES256", header["kid"] as? String == keyID, claims["iss"] as? String == teamID,
                let iat = claims["iat"] as? Int64 ?? (claims["iat"] as? Int).map(Int64.init),
                let signature = try? P256.Signing.ECDSASignature(rawRepresentation: Data(signatureBytes)),
                key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
            else { return refuse(403, "InvalidProviderToken") }
            if expiredProviderTokens.withLockedValue({ $0.contains(jwt) }) {
                return Response(
                    status: .forbidden, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"ExpiredProviderToken"}"#)))
            }
            func field(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
            guard field("apns-topic") == topic else { return refuse(400, field("apns-topic") == nil ? "MissingTopic" : "BadTopic") }
            guard field("apns-push-type") == "alert" else { return refuse(400, "InvalidPushType") }
            guard field("apns-priority") == "10" else { return refuse(400, "BadPriority") }
            guard let expiration = field("apns-expiration"), Int64(expiration) != nil else { return refuse(400, "BadExpirationDate") }
            guard let collapse = field("apns-collapse-id"), collapse.utf8.count <= 64 else { return refuse(400, "BadCollapseId") }
            guard body.readableBytes <= 4096 else { return refuse(413, "PayloadTooLarge") }
            guard let payload = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let aps = payload["aps"] as? [String: Any], let alert = aps["alert"] as? [String: Any],
                alert["title"] is String, alert["body"] is String
            else { return refuse(400, "PayloadEmpty") }
            guard deviceToken.utf8.count == 64, deviceToken.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }) else {
                return refuse(400, "BadDeviceToken")
            }
            if keepReceived {
                received.withLockedValue {
                    $0.append(
                        Received(
                            deviceToken: deviceToken, providerToken: jwt, issuedAt: iat,
                            headers: ["apns-collapse-id": collapse, "apns-expiration": expiration],
                            payload: payload.compactMapValues { $0 as? String }))
                }
            }
            let attempt = attempts.next(deviceToken)
            let deepLink = payload["deep_link"] as? String
            return try await scripted(answer(deviceToken, attempt)) { [onAccepted] in
                onAccepted?(AcceptedPush(service: "apns", token: deviceToken, deepLink: deepLink))
                return Response(status: .ok, headers: [HTTPField.Name("apns-id")!: UUID().uuidString])
            }
        }
        return router
    }
}

