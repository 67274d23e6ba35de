import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// `APNsSender` against a local HTTP/2 TLS server that checks what it receives as APNs does.
@Suite("APNs sender", .timeLimit(.minutes(3)))
struct APNsSenderTests {
    static let deviceToken = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
    static let recallID = UUID()
    static let chatID = UUID()
    static let message = RecallDelivery.message(recallID: recallID, chatID: chatID, topic: "Photosynthesis", deepLinkBase: "learnapp://", now: Date())
    static let target = PushTarget(token: deviceToken, provider: .apns)

    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    /// `timeout`: long enough for a loaded test machine; a stalled answer's test shortens it.
    func sender(
        _ apns: LocalAPNs, _ base: String, key: P256.Signing.PrivateKey? = nil, timeout: Duration = .seconds(20),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> APNsSender {
        var sender = APNsSender(
            configuration: .init(baseURL: base, topic: apns.topic, keyID: apns.keyID, teamID: apns.teamID, key: key ?? apns.key),
            http: try OutboundHTTP.client(extraCAFile: tls.certificatePath), now: now)
        sender.timeout = timeout
        return sender
    }

    @Test("an accepted push: a valid provider token, APNs' headers, the alert and the deep link as a top-level key; the token is reused")
    func accepted() async throws {
        let clock = NIOLockedValueBox(Date())
        let apns = LocalAPNs(now: { clock.withLockedValue { $0 } })
        try await serveLocally(apns.router, tls: tls) { base in
            let sender = try sender(apns, base, now: { clock.withLockedValue { $0 } })
            for _ in 0..<3 { #expect(await sender.send(Self.message, to: Self.target) == .sent) }
            clock.withLockedValue { $0 += 41 * 60 }
            #expect(await sender.send(Self.message, to: Self.target) == .sent)
        }
        #expect(apns.violations.withLockedValue { $0 }.isEmpty)
        let received = apns.received.withLockedValue { $0 }
        try #require(received.count == 4)
        #expect(Set(received.prefix(3).map(\.providerToken)).count == 1, "a provider token is reused for 40 minutes")
        #expect(received[3].providerToken != received[0].providerToken, "and replaced after")
        let first = try #require(received.first)
        #expect(first.headers["apns-collapse-id"] == Self.recallID.uuidString.lowercased())
        #expect(first.payload["deep_link"] as? String == "learnapp://chats/\(Self.chatID.uuidString.lowercased())?recall=\(Self.recallID.uuidString.lowercased())")
    }

    @Test("a recall push carries the contract's data key type: recall, a custom key beside aps")
    func recallType() throws {
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(buffer: APNsSender.payload(Self.message))) as? [String: Any])
        #expect(payload["type"] as? String == "recall")
        #expect((payload["aps"] as? [String: Any])?["type"] == nil)
    }

    @Test(
        "each of APNs' answers is one outcome",
        arguments: [
            (ScriptedAnswer.refuse(status: 410, reason: #"{"reason":"Unregistered","timestamp":1700000000000}"#), "tokenDead"),
            (.refuse(status: 400, reason: #"{"reason":"BadDeviceToken"}"#), "tokenDead"),
            (.refuse(status: 400, reason: #"{"reason":"DeviceTokenNotForTopic"}"#), "tokenDead"),
            (.refuse(status: 429, reason: #"{"reason":"TooManyRequests"}"#, retryAfter: 30), "retry after 30"),
            (.refuse(status: 503, reason: #"{"reason":"ServiceUnavailable"}"#), "retry"),
            (.garbage(status: 500), "retry"),
            (.garbage(status: 502), "retry"),
            (.refuse(status: 403, reason: #"{"reason":"InvalidProviderToken"}"#), "configurationError"),
            (.refuse(status: 400, reason: #"{"reason":"BadTopic"}"#), "configurationError"),
            (.refuse(status: 413, reason: #"{"reason":"PayloadTooLarge"}"#), "payloadError"),
            (.refuse(status: 400, reason: #"{"reason":"BadCollapseId"}"#), "payloadError"),
            (.stall(.seconds(3)), "retry"),
            (.drop, "retry"),
        ])
    func answers(_ answer: ScriptedAnswer, _ expected: String) async throws {
        let apns = LocalAPNs { _, _ in answer }
        let outcome = try await serveLocally(apns.router, tls: tls) { base in
            try await sender(apns, base, timeout: answer.isStall ? .seconds(1) : .seconds(20)).send(Self.message, to: Self.target)
        }
        #expect(outcome.kind == expected, "\(outcome)")
    }

    @Test("403 ExpiredProviderToken: a token at least 20 minutes old is replaced and the push sent at once; a younger one waits")
    func expiredProviderToken() async throws {
        let clock = NIOLockedValueBox(Date())
        let apns = LocalAPNs(now: { clock.withLockedValue { $0 } })
        try await serveLocally(apns.router, tls: tls) { base in
            let sender = try sender(apns, base, now: { clock.withLockedValue { $0 } })
            #expect(await sender.send(Self.message, to: Self.target) == .sent)
            let first = try #require(apns.received.withLockedValue { $0.last?.providerToken })
            // Apple calls the token stale 25 minutes on: a new one, one immediate retry.
            apns.expiredProviderTokens.withLockedValue { _ = $0.insert(first) }
            clock.withLockedValue { $0 += 25 * 60 }
            #expect(await sender.send(Self.message, to: Self.target) == .sent)
            let second = try #require(apns.received.withLockedValue { $0.last?.providerToken })
            #expect(second != first)
            // Stale again five minutes later: too soon for a new token (429 TooManyProviderTokenUpdates).
            apns.expiredProviderTokens.withLockedValue { _ = $0.insert(second) }
            clock.withLockedValue { $0 += 5 * 60 }
            let outcome = await sender.send(Self.message, to: Self.target)
            guard case .retry(_, let after?) = outcome else {
                Issue.record("expected a retry, got \(outcome)")
                return
            }
            #expect(after == .seconds(15 * 60))
        }
        #expect(apns.received.withLockedValue { $0.count } == 2, "the stale tokens' requests were refused before they counted")
    }

    @Test("a provider token signed with another key is refused by the server: a configuration error, never sent")
    func wrongKey() async throws {
        let apns = LocalAPNs()
        let outcome = try await serveLocally(apns.router, tls: tls) { base in
            try await sender(apns, base, key: P256.Signing.PrivateKey()).send(Self.message, to: Self.target)
        }
        #expect(outcome == .configurationError("403 InvalidProviderToken"))
        #expect(apns.received.withLockedValue { $0 }.isEmpty)
    }
}
