import AsyncHTTPClient
import BFFPlatform
import BFFWire
import Foundation
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import _CryptoExtras

/// Firebase Cloud Messaging's HTTP v1 API: `POST {base}/v1/projects/{project}/messages:send` with an
/// OAuth 2.0 access token that the service account's RS256 assertion buys at its `token_uri`
/// (RFC 7523), cached until five minutes before it expires. Android gets priority HIGH, so that Doze
/// does not hold the recall back.
struct FCMSender: PushSender {
    struct ServiceAccount: Decodable, Sendable {
        let projectID: String
        let privateKey: String
        let privateKeyID: String?
        let clientEmail: String
        let tokenURI: String

        enum CodingKeys: String, CodingKey {
            case projectID = "project_id", privateKey = "private_key", privateKeyID = "private_key_id"
            case clientEmail = "client_email", tokenURI = "token_uri"
        }
    }

    let account: ServiceAccount
    let baseURL: String
    let http: HTTPClient
    let accessTokens: FCMAccessTokens
    var timeout: Duration = .seconds(10)

    init(credentialsFile: String, baseURL: String, http: HTTPClient, now: @escaping @Sendable () -> Date = { Date() }) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: credentialsFile))
        } catch {
            throw ConfigurationError("BFF_FCM_CREDENTIALS_FILE", "\(credentialsFile) cannot be read")
        }
        guard let account = try? JSONDecoder().decode(ServiceAccount.self, from: data) else {
            throw ConfigurationError("BFF_FCM_CREDENTIALS_FILE", "is not a service account's JSON key (project_id, private_key, client_email, token_uri)")
        }
        guard let pem = try? _RSA.Signing.PrivateKey(pemRepresentation: account.privateKey), let key = try? JWTKit.Insecure.RSA.PrivateKey(backing: pem)
        else {
            throw ConfigurationError("BFF_FCM_CREDENTIALS_FILE", "its private_key is not a PEM RSA key of at least 2048 bits")
        }
        guard let tokenURL = URL(string: account.tokenURI), tokenURL.scheme == "https" else {
            throw ConfigurationError("BFF_FCM_CREDENTIALS_FILE", "its token_uri must be an https URL")
        }
        self.account = account
        self.baseURL = baseURL
        self.http = http
        self.accessTokens = FCMAccessTokens(account: account, key: key, http: http, now: now)
    }

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        let (first, used) = await attempt(message, to: target)
        // An access token refused before its time (revoked, clock skew): one new token, one more try.
        guard case .retry(let reason, _) = first, reason.hasPrefix("401 UNAUTHENTICATED"), let used else { return first }
        accessTokens.reject(used)
        return await attempt(message, to: target).0
    }

    private func attempt(_ message: PushMessage, to target: PushTarget) async -> (PushOutcome, String?) {
        let accessToken: String
        switch await accessTokens.current() {
        case .success(let token): accessToken = token
        case .failure(.outcome(let outcome)): return (outcome, nil)
        }
        return (await attempt(message, to: target, accessToken: accessToken), accessToken)
    }

    private func attempt(_ message: PushMessage, to target: PushTarget, accessToken: String) async -> PushOutcome {
        var request = HTTPClientRequest(url: "\(baseURL)/v1/projects/\(account.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "authorization", value: "Bearer \(accessToken)")
        request.headers.add(name: "content-type", value: "application/json; charset=utf-8")
        let payload = Self.payload(message, token: target.token)
        guard payload.readableBytes <= 4096 + target.token.utf8.count + 64 else {
            return .payloadError("the message is \(payload.readableBytes) bytes, over FCM's 4096 of payload")
        }
        request.body = .bytes(payload)
        do {
            let response = try await http.execute(request, timeout: .seconds(Int64(timeout.components.seconds)), span: "fcm send")
            let body = try await response.body.collect(upTo: 64 * 1024)
            return Self.outcome(status: response.status, headers: response.headers, body: body)
        } catch {
            return .retry("FCM unreachable: \(LoggableError.describe(error))", after: nil)
        }
    }

    /// A notification message (shown by the system, no app code needed), the contract's `type`, the
    /// deep link and a recall's ids as `data`, collapsing per recall (or streak day) on Android
    /// (`collapse_key`) and iOS (`apns-collapse-id`).
    static func payload(_ message: PushMessage, token: String?) -> ByteBuffer {
        let ttl = max(0, Int(message.expiresAt.timeIntervalSinceNow))
        var writer = JSONWriter(capacity: 1024)
        writer.raw(#"{"message":{"#)
        if let token {
            writer.raw(#""token":"#)
            writer.string(token)
            writer.raw(",")
        }
        writer.raw(#""notification":{"title":"#)
        writer.string(message.title)
        writer.raw(#","body":"#)
        writer.string(message.body)
        switch message.kind {
        case .recall(let recallID, let chatID):
            writer.raw(#"},"data":{"type":"recall","deep_link":"#)
            writer.string(message.deepLink)
            writer.raw(#","recall_id":"#)
            writer.string(recallID.uuidString.lowercased())
            writer.raw(#","chat_id":"#)
            writer.string(chatID.uuidString.lowercased())
        case .streak:
            writer.raw(#"},"data":{"type":"streak","deep_link":"#)
            writer.string(message.deepLink)
        }
        writer.raw(#"},"android":{"priority":"HIGH","collapse_key":"#)
        writer.string(message.collapseID)
        writer.raw(#","ttl":"#)
        writer.string("\(ttl)s")
        writer.raw(#"},"apns":{"headers":{"apns-priority":"10","apns-push-type":"alert","apns-collapse-id":"#)
        writer.string(message.collapseID)
        writer.raw(#","apns-expiration":"#)
        writer.string(String(Int64(message.expiresAt.timeIntervalSince1970)))
        writer.raw("}}}}")
        return writer.buffer
    }

    /// FCM's documented error codes (`FcmError.errorCode`, else the status), each to one outcome.
    static func outcome(status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer) -> PushOutcome {
        if status == .ok { return .sent }
        let error = (try? JSONDecoder().decode(ErrorBody.self, from: Data(buffer: body)))?.error
        let fcmCode = error?.details?.first { $0.type?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?.errorCode
        let code = fcmCode ?? error?.status ?? "no error code"
        let namesToken = error?.details?.contains { $0.fieldViolations?.contains { $0.field == "message.token" } == true } == true
        let retryAfter = headers.first(name: "retry-after").flatMap(Int.init).map { Duration.seconds($0) }
        let described = "\(status.code) \(code)" + (error?.message.map { ": \($0.prefix(200))" } ?? "")
        switch code {
        case "UNREGISTERED", "SENDER_ID_MISMATCH": return .tokenDead(described)
        case "INVALID_ARGUMENT" where namesToken: return .tokenDead(described)
        case "INVALID_ARGUMENT": return .payloadError(described)
        case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL": return .retry(described, after: retryAfter)
        case "UNAUTHENTICATED": return .retry(described, after: nil)
        case "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED", "NOT_FOUND": return .configurationError(described)
        default:
            switch status.code {
            case 429, 500...599: return .retry(described, after: retryAfter)
            case 413: return .payloadError(described)
            default: return .configurationError(described)
            }
        }
    }

    private struct ErrorBody: Decodable {
        struct Detail: Decodable {
            struct Violation: Decodable { let field: String? }
            let type: String?
            let errorCode: String?
            let fieldViolations: [Violation]?
            enum CodingKeys: String, CodingKey { case type = "@type", errorCode, fieldViolations }
        }
        struct Body: Decodable {
            let code: Int?
            let message: String?
            let status: String?
            let details: [Detail]?
        }
        let error: Body
    }
}

/// The service account's OAuth 2.0 access token, shared by every push: one fetch at a time, reused
/// until five minutes before it expires, and fetched again when FCM refused it.
final class FCMAccessTokens: Sendable {
    struct AccessToken: Sendable {
        let value: String
        let expiresAt: Date
    }

    enum Failure: Error {
        case outcome(PushOutcome)
    }

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private let account: FCMSender.ServiceAccount
    private let key: JWTKit.Insecure.RSA.PrivateKey
    private let http: HTTPClient
    private let now: @Sendable () -> Date
    private let rejected = NIOLockedValueBox<String?>(nil)
    private let shared: SharedFetch<AccessToken>

    init(account: FCMSender.ServiceAccount, key: JWTKit.Insecure.RSA.PrivateKey, http: HTTPClient, now: @escaping @Sendable () -> Date) {
        self.account = account
        self.key = key
        self.http = http
        self.now = now
        let fetch = FetchContext(account: account, key: key, http: http, now: now)
        self.shared = SharedFetch(failureBackoff: .seconds(5)) { try await fetch.fetch() }
    }

    func current() async -> Result<String, Failure> {
        do {
            let now = now()
            let rejected = rejected.withLockedValue { $0 }
            let token = try await shared.get { token, _ in token.value == rejected || token.expiresAt.timeIntervalSince(now) < 300 }
            return .success(token.value)
        } catch Failure.outcome(let outcome) {
            return .failure(.outcome(outcome))
        } catch {
            return .failure(.outcome(.retry("the OAuth token endpoint: \(LoggableError.describe(error))", after: nil)))
        }
    }

    /// FCM refused `token`: the next `current()` fetches another.
    func reject(_ token: String) {
        rejected.withLockedValue { $0 = token }
    }

    /// The grant's RS256 JWT: `iat` and `exp` in whole seconds, an hour apart, as Google allows at most.
    static func assertion(account: FCMSender.ServiceAccount, key: JWTKit.Insecure.RSA.PrivateKey, issuedAt: Date) async throws -> String {
        let kid = account.privateKeyID.map { JWKIdentifier(string: $0) }
        let keys = await JWTKeyCollection().add(rsa: key, digestAlgorithm: .sha256, kid: kid)
        let claims = GoogleAssertionClaims(
            iss: account.clientEmail, scope: FCMAccessTokens.scope, aud: account.tokenURI,
            iat: WholeSeconds(issuedAt), exp: WholeSeconds(issuedAt.addingTimeInterval(3600)))
        return try await keys.sign(claims, kid: kid)
    }

    private struct FetchContext: Sendable {
        let account: FCMSender.ServiceAccount
        let key: JWTKit.Insecure.RSA.PrivateKey
        let http: HTTPClient
        let now: @Sendable () -> Date

        /// RFC 7523: a JWT signed by the service account's key is the grant.
        func fetch() async throws -> AccessToken {
            let issued = now()
            let assertion = try await FCMAccessTokens.assertion(account: account, key: key, issuedAt: issued)
            var request = HTTPClientRequest(url: account.tokenURI)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
            let response = try await http.execute(request, timeout: .seconds(10), span: "google oauth token")
            let body = try await response.body.collect(upTo: 64 * 1024)
            guard response.status == .ok else {
                // RFC 6749 §5.2's `error` (invalid_grant, invalid_scope, …) says which; its description may quote the request.
                struct Refusal: Decodable { let error: String }
                let code = (try? JSONDecoder().decode(Refusal.self, from: Data(buffer: body))).map { " \($0.error.prefix(64))" } ?? ""
                let described = "the OAuth token endpoint answered \(response.status.code)\(code)"
                // The account or its key refused: no retry helps until an operator acts.
                if response.status.code == 400 || response.status.code == 401 || response.status.code == 403 {
                    throw Failure.outcome(.configurationError(described))
                }
                throw Failure.outcome(.retry(described, after: response.headers.first(name: "retry-after").flatMap(Int.init).map { .seconds($0) }))
            }
            struct Grant: Decodable {
                let access_token: String
                let expires_in: Int
            }
            guard let grant = try? JSONDecoder().decode(Grant.self, from: Data(buffer: body)), !grant.access_token.isEmpty else {
                throw Failure.outcome(.retry("the OAuth token endpoint answered 200 without an access token", after: nil))
            }
            return AccessToken(value: grant.access_token, expiresAt: issued.addingTimeInterval(TimeInterval(grant.expires_in)))
        }
    }
}
