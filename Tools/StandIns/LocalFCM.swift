import BFFWire
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import _CryptoExtras

/// FCM's HTTP v1 API and Google's OAuth token endpoint, refusing what Google documents it refuses.
/// The token endpoint ("Using OAuth 2.0 for Server to Server Applications", RFC 7523): a form body
/// with the JWT-bearer grant; an RS256 assertion with `typ` JWT and the account's key id, signed by
/// its key; `iss`, `scope`, `aud` (the token URI) and integer `iat` and `exp` at most an hour apart,
/// neither expired nor issued in the future. `messages:send`: the Bearer access token, a JSON body
/// and the `Message` rules of `FCMMessageRules`.
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
    public let privateKeyID = "key-1"
    public let issued = NIOLockedValueBox<[String]>([])
    /// Access tokens refused with 401 UNAUTHENTICATED (revoked early).
    public let revoked = NIOLockedValueBox<Set<String>>([])
    public let tokenRequests = NIOLockedValueBox(0)
    /// Every message that passed the checks, unless made with `keepReceived: false`.
    public let received = NIOLockedValueBox<[Received]>([])
    public let violations = NIOLockedValueBox<[String]>([])
    public let oauthAnswer = NIOLockedValueBox<ScriptedAnswer>(.accept)
    /// The token URIs of the credentials files written: an assertion's `aud` must be one of them.
    let tokenURIs = NIOLockedValueBox<Set<String>>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer
    let now: @Sendable () -> Date
    let keepReceived: Bool
    let onAccepted: (@Sendable (AcceptedPush) -> Void)?
    private let attempts = AttemptCounter()

    /// How far an assertion's `iat` may lie ahead of this server's clock.
    static let clockSkew: Int64 = 60

    /// `answer` decides each send's answer from the registration token and its attempt (1 for the
    /// first request); `onAccepted` sees every message answered 200; `now` is the token endpoint's clock.
    public init(
        answer: @escaping @Sendable (_ token: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept },
        keepReceived: Bool = true, onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.now = now
        self.keepReceived = keepReceived
        self.onAccepted = onAccepted
        self.answer = answer
    }

    /// The service account's JSON key, naming this server's token endpoint (`base`/token), where
    /// `BFF_FCM_CREDENTIALS_FILE` can name it; returns its path.
    public func credentialsFile(in directory: String, base: String) throws -> String {
        let json: [String: String] = [
            "type": "service_account", "project_id": project, "private_key_id": privateKeyID, "private_key": key.pemRepresentation,
            "client_email": clientEmail, "token_uri": "\(base)/token",
        ]
        tokenURIs.withLockedValue { _ = $0.insert("\(base)/token") }
        let path = "\(directory)/service-account.json"
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Google's error body: `google.rpc.Status` with the FCM error code and the refused field.
    private func error(_ status: Int, _ code: String, message: String? = nil, fcmCode: String? = nil, field: String? = nil) -> Response {
        if let message { violations.withLockedValue { $0.append("\(status) \(code): \(message)") } }
        var details: [String] = []
        if let fcmCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(fcmCode)"}"#) }
        if let field {
            details.append(
                #"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":\#(jsonString(field)),"description":\#(jsonString(message ?? code))}]}"#
            )
        }
        let body = #"{"error":{"code":\#(status),"message":\#(jsonString(message ?? code)),"status":"\#(code)","details":[\#(details.joined(separator: ","))]}}"#
        return Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// The token endpoint's refusal (RFC 6749 §5.2), as Google words it.
    private func oauthError(_ error: String, _ description: String, status: Int = 400) -> Response {
        violations.withLockedValue { $0.append("token endpoint \(error): \(description)") }
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"error":"\#(error)","error_description":\#(jsonString(description))}"#)))
    }

    /// Why Google's token endpoint would refuse this grant request: (`error`, description), nil when it would not.
    func refusal(ofGrant request: Request, form: String) -> (String, String)? {
        guard mediaType(request.headers[.contentType]) == "application/x-www-form-urlencoded" else {
            return ("invalid_request", "the body must be application/x-www-form-urlencoded")
        }
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return ("unsupported_grant_type", "Invalid grant_type: \(fields["grant_type"] ?? "")")
        }
        guard let assertion = fields["assertion"], let jwt = CompactJWT(assertion) else { return ("invalid_grant", "Invalid JWT: not a JWT") }
        guard jwt.header["alg"] as? String == "RS256", jwt.header["typ"] as? String == "JWT" else {
            return ("invalid_grant", "Invalid JWT: the header must be {\"alg\":\"RS256\",\"typ\":\"JWT\"}")
        }
        guard jwt.header["kid"] as? String == privateKeyID else { return ("invalid_grant", "Invalid JWT: the kid names no key of this account") }
        let signature = _RSA.Signing.RSASignature(rawRepresentation: jwt.signature)
        guard key.publicKey.isValidSignature(signature, for: jwt.signingInput, padding: .insecurePKCS1v1_5) else {
            return ("invalid_grant", "Invalid JWT Signature.")
        }
        guard jwt.claims["iss"] as? String == clientEmail else { return ("invalid_grant", "Invalid JWT: iss is not this service account") }
        guard let scope = jwt.claims["scope"] as? String, scope.split(separator: " ").contains(Substring(Self.scope)) else {
            return ("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }
        guard let audience = jwt.claims["aud"] as? String, tokenURIs.withLockedValue({ $0.contains(audience) }) else {
            return ("invalid_grant", "Invalid JWT: Failed audience check.")
        }
        guard let iat = jwt.numericDate("iat"), let exp = jwt.numericDate("exp") else {
            return ("invalid_grant", "Invalid JWT: iat and exp must be integer NumericDates (seconds since the epoch).")
        }
        let now = Int64(self.now().timeIntervalSince1970)
        guard exp > iat, exp - iat <= 3600, exp > now, iat <= now + Self.clockSkew else {
            return (
                "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
            )
        }
        return nil
    }

    public var router: Router<BasicRequestContext> {
        let router = Router()
        router.post("/token") { [self] request, _ -> Response in
            tokenRequests.withLockedValue { $0 += 1 }
            let form = String(buffer: try await request.body.collect(upTo: 65536))
            if let (error, description) = refusal(ofGrant: request, form: form) { return oauthError(error, description) }
            let token = "ya29.local-\(UUID().uuidString)"
            return try await scripted(oauthAnswer.withLockedValue { $0 }) { [self] in
                issued.withLockedValue { $0.append(token) }
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)))
            }
        }
        router.post("/v1/projects/:project/messages:send") { [self] request, context -> Response in
            guard context.parameters.get("project") == project else { return error(404, "NOT_FOUND", message: "no such project") }
            let bearer = request.headers[.authorization].flatMap { $0.lowercased().hasPrefix("bearer ") ? String($0.dropFirst(7)) : nil }
            guard let bearer, issued.withLockedValue({ $0.contains(bearer) }), !revoked.withLockedValue({ $0.contains(bearer) }) else {
                return error(401, "UNAUTHENTICATED", message: "Request had invalid authentication credentials.")
            }
            guard mediaType(request.headers[.contentType]) == "application/json" else {
                return error(400, "INVALID_ARGUMENT", message: "the body must be application/json")
            }
            let body = try await request.body.collect(upTo: 1_000_000)
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
                return error(400, "INVALID_ARGUMENT", message: "Invalid JSON payload received.")
            }
            if let violation = FCMMessageRules.checkRequest(object) {
                return error(400, "INVALID_ARGUMENT", message: violation.description, fcmCode: "INVALID_ARGUMENT", field: violation.field)
            }
            let message = object["message"] as? [String: Any] ?? [:]
            let token = message["token"] as? String ?? ""
            let data = message["data"] as? [String: Any] ?? [:]
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

