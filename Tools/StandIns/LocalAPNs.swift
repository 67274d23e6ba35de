import BFFWire
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// APNs as Apple documents it ("Sending notification requests to APNs", "Establishing a token-based
/// connection to APNs", "Handling notification responses from APNs"), refusing with Apple's reasons:
/// the provider token's ES256 signature against the team's key, its `kid`, `iss` and integer `iat`
/// (403 ExpiredProviderToken past an hour); `apns-topic`, `apns-push-type`, `apns-priority`,
/// `apns-expiration`, `apns-collapse-id` and `apns-id` headers, each at most once; a device token of
/// 64 hexadecimal digits; a JSON object payload of at most 4096 bytes with an `aps` dictionary.
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
    let now: @Sendable () -> Date
    let keepReceived: Bool
    let onAccepted: (@Sendable (AcceptedPush) -> Void)?
    private let attempts = AttemptCounter()
    /// Provider tokens whose header, claims and signature passed, with their `iat`: a client sends one
    /// token for up to an hour, as Apple asks, and the P-256 verification of each request was the
    /// stand-in's largest cost in `scripts/bench push`. The token's age is still checked on every request.
    private let verifiedTokens = NIOLockedValueBox<[String: Int64]>([:])

    /// The push types Apple documents for `apns-push-type`.
    static let pushTypes: Set = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets",
    ]
    /// How far a provider token's `iat` may lie ahead of this server's clock.
    static let clockSkew: Int64 = 60

    /// `answer` decides each answer from the device token and its attempt (1 for the first request);
    /// `onAccepted` sees every push answered 200; `now` is the clock provider tokens are aged by.
    public init(
        answer: @escaping @Sendable (_ deviceToken: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        keepReceived: Bool = true, onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.now = now
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

    /// The `iat` of a provider token signed with this key id and team by ES256, remembered; nil when it is not one.
    private func verify(_ jwt: String) -> Int64? {
        guard let token = CompactJWT(jwt), token.header["alg"] as? String == "ES256", token.header["kid"] as? String == keyID,
            token.claims["iss"] as? String == teamID, let iat = token.numericDate("iat"),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: token.signature),
            key.publicKey.isValidSignature(signature, for: token.signingInput)
        else { return nil }
        verifiedTokens.withLockedValue { verified in
            if verified.count >= 1_000 { verified.removeAll() }
            verified[jwt] = iat
        }
        return iat
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
            guard let authorization = request.headers[.authorization] else { return refuse(403, "MissingProviderToken") }
            guard authorization.lowercased().hasPrefix("bearer ") else { return refuse(403, "InvalidProviderToken") }
            let jwt = String(authorization.dropFirst("bearer ".count))
            guard let iat = verifiedTokens.withLockedValue({ $0[jwt] }) ?? verify(jwt) else { return refuse(403, "InvalidProviderToken") }
            let now = Int64(self.now().timeIntervalSince1970)
            guard iat <= now + Self.clockSkew else { return refuse(403, "InvalidProviderToken") }
            guard now - iat <= 3600 else { return refuse(403, "ExpiredProviderToken") }
            if expiredProviderTokens.withLockedValue({ $0.contains(jwt) }) {
                return Response(
                    status: .forbidden, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"reason":"ExpiredProviderToken"}"#)))
            }
            func field(_ name: String) -> String? { HTTPField.Name(name).flatMap { request.headers[$0] } }
            let names = ["apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id"]
            guard names.allSatisfy({ name in HTTPField.Name(name).map { request.headers[values: $0].count <= 1 } ?? true }) else {
                return refuse(400, "DuplicateHeaders")
            }
            guard let topic = field("apns-topic") else { return refuse(400, "MissingTopic") }
            guard topic == self.topic else { return refuse(400, "BadTopic") }
            guard let pushType = field("apns-push-type"), Self.pushTypes.contains(pushType) else { return refuse(400, "InvalidPushType") }
            if let priority = field("apns-priority"), !["10", "5", "1"].contains(priority) { return refuse(400, "BadPriority") }
            let expiration = field("apns-expiration")
            if let expiration, expiration.isEmpty || !expiration.utf8.allSatisfy({ (0x30...0x39).contains($0) }) || Int64(expiration) == nil {
                return refuse(400, "BadExpirationDate")
            }
            let collapse = field("apns-collapse-id")
            if let collapse, collapse.utf8.count > 64 { return refuse(400, "BadCollapseId") }
            if let id = field("apns-id"), UUID(uuidString: id) == nil || id.utf8.count != 36 { return refuse(400, "BadMessageId") }
            guard deviceToken.utf8.count == 64, deviceToken.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }) else {
                return refuse(400, "BadDeviceToken")
            }
            guard body.readableBytes <= 4096 else { return refuse(413, "PayloadTooLarge") }
            guard body.readableBytes > 0 else { return refuse(400, "PayloadEmpty") }
            guard let payload = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let aps = payload["aps"] as? [String: Any]
            else { return refuse(400, "PayloadEmpty") }
            // An alert push shows something: an alert (a string or a dictionary of strings), a sound or a badge.
            if pushType == "alert" {
                let alert = aps["alert"]
                guard alert == nil || alert is String || alert is [String: Any], alert != nil || aps["sound"] != nil || aps["badge"] != nil
                else { return refuse(400, "PayloadEmpty") }
                if let alert = alert as? [String: Any], ["title", "subtitle", "body"].contains(where: { alert[$0] != nil && !(alert[$0] is String) }) {
                    return refuse(400, "PayloadEmpty")
                }
            }
            if keepReceived {
                received.withLockedValue {
                    $0.append(
                        Received(
                            deviceToken: deviceToken, providerToken: jwt, issuedAt: iat,
                            headers: ["apns-collapse-id": collapse, "apns-expiration": expiration, "apns-push-type": pushType].compactMapValues { $0 },
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

