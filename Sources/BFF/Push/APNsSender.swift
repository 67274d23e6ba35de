import AsyncHTTPClient
import BFFPlatform
import BFFWire
import Crypto
import Foundation
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// APNs over HTTP/2 with token authentication (Apple, "Sending notification requests to APNs"):
/// `POST {base}/3/device/{token}` with an ES256 provider token, `apns-topic`, `apns-push-type: alert`,
/// `apns-priority: 10`, `apns-expiration` and `apns-collapse-id`.
struct APNsSender: PushSender {
    struct Configuration: Sendable {
        /// `BFF_APNS_BASE_URL`, `https://api.push.apple.com` (the sandbox: `https://api.sandbox.push.apple.com`).
        var baseURL: String
        /// `BFF_APNS_TOPIC`: the app's bundle id.
        var topic: String
        var keyID: String
        var teamID: String
        /// The `.p8` key's PEM (`BFF_APNS_KEY_FILE`).
        var key: P256.Signing.PrivateKey
    }

    let configuration: Configuration
    let http: HTTPClient
    let tokens: APNsProviderTokens
    var timeout: Duration = .seconds(10)

    init(configuration: Configuration, http: HTTPClient, now: @escaping @Sendable () -> Date = { Date() }) {
        self.configuration = configuration
        self.http = http
        self.tokens = APNsProviderTokens(keyID: configuration.keyID, teamID: configuration.teamID, key: configuration.key, now: now)
    }

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        let first = await attempt(message, to: target)
        // A provider token Apple calls stale is replaced once, at once, when ours is old enough for
        // Apple to accept a new one; a younger one means a clock is off, and a new token would only
        // meet 429 TooManyProviderTokenUpdates.
        guard case .retry(let reason, _) = first, reason.hasPrefix("403 ExpiredProviderToken") else { return first }
        switch tokens.renew() {
        case .renewed: return await attempt(message, to: target)
        case .tooSoon(let wait): return .retry("403 ExpiredProviderToken on a provider token younger than 20 minutes; is the clock right?", after: wait)
        }
    }

    private func attempt(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        let providerToken: String
        do {
            providerToken = try await tokens.current()
        } catch {
            return .configurationError("the provider token cannot be signed: \(LoggableError.describe(error))")
        }
        var request = HTTPClientRequest(url: "\(configuration.baseURL)/3/device/\(target.token)")
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(providerToken)")
        request.headers.add(name: "apns-topic", value: configuration.topic)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-priority", value: "10")
        request.headers.add(name: "apns-expiration", value: String(Int64(message.expiresAt.timeIntervalSince1970)))
        request.headers.add(name: "apns-collapse-id", value: message.collapseID)
        request.headers.add(name: "content-type", value: "application/json")
        let payload = Self.payload(message)
        guard payload.readableBytes <= 4096 else { return .payloadError("the payload is \(payload.readableBytes) bytes, over APNs' 4096") }
        request.body = .bytes(payload)
        let status: HTTPResponseStatus
        let body: ByteBuffer
        let headers: HTTPHeaders
        do {
            let response = try await http.execute(request, timeout: .seconds(Int64(timeout.components.seconds)), span: "apns push")
            status = response.status
            headers = response.headers
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            return .retry("APNs unreachable: \(LoggableError.describe(error))", after: nil)
        }
        return Self.outcome(status: status, headers: headers, body: body)
    }

    /// The display alert, and beside `aps` the contract's `type`, the deep link and, for a recall, the
    /// ids the app routes by; a streak push carries nothing else.
    static func payload(_ message: PushMessage) -> ByteBuffer {
        var writer = JSONWriter(capacity: 512)
        writer.raw(#"{"aps":{"alert":{"title":"#)
        writer.string(message.title)
        writer.raw(#","body":"#)
        writer.string(message.body)
        switch message.kind {
        case .recall(let recallID, let chatID):
            writer.raw(#"},"sound":"default","thread-id":"recall"},"type":"recall","deep_link":"#)
            writer.string(message.deepLink)
            writer.raw(#","recall_id":"#)
            writer.string(recallID.uuidString.lowercased())
            writer.raw(#","chat_id":"#)
            writer.string(chatID.uuidString.lowercased())
        case .streak:
            writer.raw(#"},"sound":"default","thread-id":"streak"},"type":"streak","deep_link":"#)
            writer.string(message.deepLink)
        }
        writer.raw("}")
        return writer.buffer
    }

    /// Apple's documented answers, each to one outcome; an answer it does not document is kept in
    /// the reason and treated as the nearest documented kind.
    static func outcome(status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer) -> PushOutcome {
        if status == .ok { return .sent }
        let reason = (try? JSONDecoder().decode(Reason.self, from: Data(buffer: body)))?.reason ?? "no reason given"
        let retryAfter = headers.first(name: "retry-after").flatMap(Int.init).map { Duration.seconds($0) }
        let described = "\(status.code) \(reason)"
        switch (status.code, reason) {
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .tokenDead(described)
        case (403, "ExpiredProviderToken"): return .retry(described, after: nil)
        case (400, "BadTopic"), (400, "MissingTopic"), (400, "TopicDisallowed"), (403, _), (405, _): return .configurationError(described)
        case (413, _), (400, _): return .payloadError(described)
        case (429, _), (500...599, _): return .retry(described, after: retryAfter)
        default: return .configurationError(described)
        }
    }

    private struct Reason: Decodable {
        let reason: String
    }
}

/// The provider token: an ES256 JWT of the team and key id, reused for 40 minutes (Apple accepts
/// one between 20 and 60 minutes old and refuses new ones more often than every 20).
final class APNsProviderTokens: Sendable {
    enum Renewal: Equatable {
        case renewed
        case tooSoon(Duration)
    }

    static let reuse: TimeInterval = 40 * 60
    static let minimumAge: TimeInterval = 20 * 60

    /// A token being signed or signed, and the time it carries.
    private struct Issued: Sendable {
        let token: Task<String, any Error>
        let issuedAt: Date
    }

    private let keyID: String
    private let teamID: String
    private let key: P256.Signing.PrivateKey
    private let now: @Sendable () -> Date
    private let cached = NIOLockedValueBox<Issued?>(nil)

    init(keyID: String, teamID: String, key: P256.Signing.PrivateKey, now: @escaping @Sendable () -> Date) {
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
        self.now = now
    }

    /// The cached token, or a new one when it is 40 minutes old; the pushes asking meanwhile share its signing.
    func current() async throws -> String {
        let now = now()
        let issued = cached.withLockedValue { cached in
            if let cached, now.timeIntervalSince(cached.issuedAt) < Self.reuse { return cached }
            let fresh = Issued(token: sign(at: now), issuedAt: now)
            cached = fresh
            return fresh
        }
        do {
            return try await issued.token.value
        } catch {
            // The next push signs again rather than meet this failure for 40 minutes.
            cached.withLockedValue { if $0?.token == issued.token { $0 = nil } }
            throw error
        }
    }

    /// After `ExpiredProviderToken`: a new token, unless the current one is too young for Apple to take another.
    func renew() -> Renewal {
        let now = now()
        return cached.withLockedValue { cached in
            if let cached, now.timeIntervalSince(cached.issuedAt) < Self.minimumAge {
                return .tooSoon(.seconds(Self.minimumAge - now.timeIntervalSince(cached.issuedAt)))
            }
            cached = Issued(token: sign(at: now), issuedAt: now)
            return .renewed
        }
    }

    /// ES256 with the key id in the header and the team as `iss`; `iat` in whole seconds.
    private func sign(at date: Date) -> Task<String, any Error> {
        Task { [keyID, teamID, key] in
            let kid = JWKIdentifier(string: keyID)
            let keys = await JWTKeyCollection().add(ecdsa: try ES256PrivateKey(backing: key), kid: kid)
            return try await keys.sign(APNsProviderClaims(iss: teamID, iat: WholeSeconds(date)), kid: kid)
        }
    }
}
