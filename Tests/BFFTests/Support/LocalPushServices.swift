import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import ServiceLifecycle
import _CryptoExtras

@testable import BFF
@testable import BFFWire

/// How a local push service answers one request.
enum ScriptedAnswer: Sendable {
    case accept
    case refuse(status: Int, reason: String, retryAfter: Int? = nil)
    /// A body that is no JSON at all.
    case garbage(status: Int)
    /// Waits this long before answering (the client's timeout is shorter).
    case stall(Duration)
    /// Breaks the response off: the client sees the stream or connection reset.
    case drop
}

extension ScriptedAnswer {
    var isStall: Bool {
        if case .stall = self { return true }
        return false
    }
}

/// A TLS certificate for `localhost`, and the CA file a client must be given to trust it.
struct LocalTLS: Sendable {
    let directory: String
    let certificatePath: String
    let keyPath: String

    static func make() throws -> LocalTLS {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bff-push-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = try DatabaseTLSTests.selfSignedCertificate(into: directory)
        return LocalTLS(directory: directory, certificatePath: certificate, keyPath: "\(directory)/server.key")
    }

    func serverConfiguration() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
    }
}

/// Runs `router` over HTTP/2 with TLS on a free port of 127.0.0.1 while `body` runs; returns its base URL to `body`.
func serveLocally<T: Sendable>(
    _ router: Router<BasicRequestContext>, tls: LocalTLS, _ body: @escaping @Sendable (String) async throws -> T
) async throws -> T {
    let port = NIOLockedValueBox(0)
    let started = AsyncStream<Void>.makeStream()
    let app = Application(
        router: router, server: try .http2Upgrade(tlsConfiguration: try tls.serverConfiguration()),
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            port.withLockedValue { $0 = channel.localAddress?.port ?? 0 }
            started.continuation.yield()
        },
        logger: TestEnvironment.quietLogger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        let services = ServiceGroup(services: [app], logger: TestEnvironment.quietLogger)
        group.addTask {
            try await services.run()
            return nil
        }
        for await _ in started.stream { break }
        defer { Task { await services.triggerGracefulShutdown() } }
        let result = try await body("https://localhost:\(port.withLockedValue { $0 })")
        await services.triggerGracefulShutdown()
        return result
    }
}

func scripted(_ answer: ScriptedAnswer, accepted: @escaping @Sendable () -> Response) async throws -> Response {
    switch answer {
    case .accept:
        return accepted()
    case .refuse(let status, let reason, let retryAfter):
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: reason)))
    case .garbage(let status):
        return Response(status: .init(code: status), headers: [.contentType: "text/html"], body: .init(byteBuffer: ByteBuffer(string: "<html>Bad Gateway</html>")))
    case .stall(let duration):
        try? await Task.sleep(for: duration)
        return accepted()
    case .drop:
        struct Dropped: Error {}
        return Response(
            status: .ok,
            body: .init { writer in
                try await writer.write(ByteBuffer(string: "{"))
                throw Dropped()
            })
    }
}

/// APNs as Apple documents it, checking what it receives the way APNs does: the provider token's
/// ES256 signature against the team's key, its `kid` and `iss`, the topic, push type, priority,
/// expiration and collapse id headers, and a JSON payload of at most 4 KB with an alert.
final class LocalAPNs: Sendable {
    struct Received: Sendable {
        let deviceToken: String
        let providerToken: String
        let issuedAt: Int64
        let headers: [String: String]
        let payload: [String: any Sendable]
    }

    let key = P256.Signing.PrivateKey()
    let keyID = "ABC123DEFG"
    let teamID = "TEAM123456"
    let topic = "jp.example.learnapp"
    /// Provider tokens this server calls stale (answering 403 ExpiredProviderToken).
    let expiredProviderTokens = NIOLockedValueBox<Set<String>>([])
    let received = NIOLockedValueBox<[Received]>([])
    let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer

    init(answer: @escaping @Sendable (_ deviceToken: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept }) {
        self.answer = answer
    }

    func keyFile(in directory: String) throws -> String {
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

    var router: Router<BasicRequestContext> {
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
            let attempt = received.withLockedValue { received in
                received.append(
                    Received(
                        deviceToken: deviceToken, providerToken: jwt, issuedAt: iat,
                        headers: ["apns-collapse-id": collapse, "apns-expiration": expiration],
                        payload: payload.compactMapValues { $0 as? String }))
                return received.filter { $0.deviceToken == deviceToken }.count
            }
            return try await scripted(answer(deviceToken, attempt)) {
                Response(status: .ok, headers: [HTTPField.Name("apns-id")!: UUID().uuidString])
            }
        }
        return router
    }
}

/// FCM's HTTP v1 API and Google's OAuth token endpoint: the assertion's RS256 signature against the
/// service account's key, its claims and grant type; the access token on every send; the message's shape.
final class LocalFCM: Sendable {
    struct Received: Sendable {
        let token: String
        let message: String
    }

    let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    let project = "learnapp-prod"
    let clientEmail = "bff-push@learnapp-prod.iam.gserviceaccount.com"
    let issued = NIOLockedValueBox<[String]>([])
    /// Access tokens refused with 401 UNAUTHENTICATED (revoked early).
    let revoked = NIOLockedValueBox<Set<String>>([])
    let tokenRequests = NIOLockedValueBox(0)
    let received = NIOLockedValueBox<[Received]>([])
    let violations = NIOLockedValueBox<[String]>([])
    let oauthAnswer = NIOLockedValueBox<ScriptedAnswer>(.accept)
    let answer: @Sendable (String, Int) -> ScriptedAnswer

    init(answer: @escaping @Sendable (_ token: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept }) {
        self.answer = answer
    }

    /// The service account's JSON key, naming this server's token endpoint.
    func credentialsFile(in directory: String, base: String) throws -> String {
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

    var router: Router<BasicRequestContext> {
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
                claims["iss"] as? String == clientEmail, claims["scope"] as? String == FCMAccessTokens.scope,
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
            let attempt = received.withLockedValue { received in
                received.append(Received(token: token, message: String(buffer: body)))
                return received.filter { $0.token == token }.count
            }
            return try await scripted(answer(token, attempt)) {
                Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"name":"projects/\#(self.project)/messages/0:\#(UUID().uuidString)"}"#)))
            }
        }
        return router
    }
}

extension PushOutcome {
    /// The outcome's kind, with a retry's `Retry-After`, for tests' tables of answers.
    var kind: String {
        switch self {
        case .sent: "sent"
        case .tokenDead: "tokenDead"
        case .retry(_, let after?): "retry after \(after.components.seconds)"
        case .retry: "retry"
        case .configurationError: "configurationError"
        case .payloadError: "payloadError"
        }
    }
}

/// Notification Hubs' direct send, checking the SAS token's HMAC against the hub's key, its resource,
/// expiry and key name, the format and device handle headers, and the platform payload.
final class LocalNotificationHubs: Sendable {
    struct Received: Sendable {
        let format: String
        let deviceHandle: String
        let payload: String
    }

    let keyName = "DefaultFullSharedAccessSignature"
    let key = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    let hub = "learnapp-hub"
    let received = NIOLockedValueBox<[Received]>([])
    let violations = NIOLockedValueBox<[String]>([])
    let answer: @Sendable (String, Int) -> ScriptedAnswer

    init(answer: @escaping @Sendable (_ deviceHandle: String, _ attempt: Int) -> ScriptedAnswer = { _, _ in .accept }) {
        self.answer = answer
    }

    func connectionString(base: String) -> String {
        "Endpoint=\(base.replacingOccurrences(of: "https://", with: "sb://"))/;SharedAccessKeyName=\(keyName);SharedAccessKey=\(key)"
    }

    private func refuse(_ status: Int, _ why: String) -> Response {
        violations.withLockedValue { $0.append(why) }
        return Response(status: .init(code: status))
    }

    var router: Router<BasicRequestContext> {
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
            let attempt = received.withLockedValue { received in
                received.append(Received(format: format, deviceHandle: handle, payload: body))
                return received.filter { $0.deviceHandle == handle }.count
            }
            return try await scripted(answer(handle, attempt)) { Response(status: .created) }
        }
        return router
    }
}
