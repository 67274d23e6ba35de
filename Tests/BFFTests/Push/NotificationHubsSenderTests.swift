import Foundation
import NIOConcurrencyHelpers
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// `NotificationHubsSender` against a local hub that checks the SAS token's signature, the headers
/// and the platform payloads.
@Suite("Notification Hubs sender", .timeLimit(.minutes(3)))
struct NotificationHubsSenderTests {
    static let message = RecallDelivery.message(recallID: UUID(), chatID: UUID(), topic: "Photosynthesis", deepLinkBase: "learnapp://", now: Date())
    static let apns = PushTarget(token: "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad", provider: .apns)
    static let fcm = PushTarget(token: "dXk8:APA91bH" + String(repeating: "q", count: 140), provider: .fcm)

    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    func sender(_ hubs: LocalNotificationHubs, _ base: String, key: String? = nil, timeout: Duration = .seconds(20)) throws -> NotificationHubsSender {
        var text = hubs.connectionString(base: base)
        if let key { text = text.replacingOccurrences(of: hubs.key, with: key) }
        let connection = try #require(NotificationHubsSender.Connection(connectionString: text))
        var sender = NotificationHubsSender(connection: connection, hub: hubs.hub, http: try OutboundHTTP.client(extraCAFile: tls.certificatePath))
        sender.timeout = timeout
        return sender
    }

    @Test("an APNs and an FCM device through the hub: 201 is sent; the SAS token verifies; apple and fcmv1 payloads carry the deep link")
    func accepted() async throws {
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let sender = try sender(hubs, base)
            #expect(await sender.send(Self.message, to: Self.apns) == .sent)
            #expect(await sender.send(Self.message, to: Self.fcm) == .sent)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
        #expect(hubs.received.withLockedValue { $0.map(\.format) } == ["apple", "fcmv1"])
        #expect(hubs.received.withLockedValue { $0.map(\.deviceHandle) } == [Self.apns.token, Self.fcm.token])
        // The contract's data key in both formats: beside aps, and in the FCM message's data.
        let payloads = try hubs.received.withLockedValue { $0 }.map { try #require(try JSONSerialization.jsonObject(with: Data($0.payload.utf8)) as? [String: Any]) }
        #expect(payloads.first?["type"] as? String == "recall")
        #expect(((payloads.last?["message"] as? [String: Any])?["data"] as? [String: Any])?["type"] as? String == "recall")
    }

    @Test("a SAS token signed with another key is refused by the hub: a configuration error")
    func wrongKey() async throws {
        let hubs = LocalNotificationHubs()
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await sender(hubs, base, key: Data(repeating: 7, count: 32).base64EncodedString()).send(Self.message, to: Self.apns)
        }
        #expect(outcome == .configurationError("401 from Notification Hubs"))
        #expect(hubs.received.withLockedValue { $0 }.isEmpty)
    }

    @Test(
        "each of the hub's answers is one outcome",
        arguments: [
            (ScriptedAnswer.refuse(status: 400, reason: ""), "payloadError"),
            (.refuse(status: 413, reason: ""), "payloadError"),
            (.refuse(status: 403, reason: "quota"), "retry"),
            (.refuse(status: 429, reason: "", retryAfter: 10), "retry after 10"),
            (.refuse(status: 503, reason: ""), "retry"),
            (.refuse(status: 404, reason: ""), "configurationError"),
            (.garbage(status: 500), "retry"),
            (.stall(.seconds(3)), "retry"),
            (.drop, "retry"),
        ])
    func answers(_ answer: ScriptedAnswer, _ expected: String) async throws {
        let hubs = LocalNotificationHubs { _, _ in answer }
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await sender(hubs, base, timeout: answer.isStall ? .seconds(1) : .seconds(20)).send(Self.message, to: Self.fcm)
        }
        #expect(outcome.kind == expected, "\(outcome)")
    }

    @Test("BFF_PUSH_ROUTE=notification-hubs sends every provider's tokens through the hub, whatever else is configured")
    func route() throws {
        let hubs = LocalNotificationHubs()
        let environment = TestEnvironment.serverEnvironment(
            database: try DatabaseURL(parsing: "postgres://bff@localhost:5432/unused"),
            [
                "BFF_PUSH_ROUTE": "notification-hubs", "BFF_NH_CONNECTION_STRING": hubs.connectionString(base: "https://localhost:1"),
                "BFF_NH_HUB": hubs.hub,
            ])
        let features = try AppConfiguration(environment: environment).features
        let senders = try PushSenders(configuration: features.push, outbound: features.outbound)
        #expect(senders.sender(for: .apns) is NotificationHubsSender)
        #expect(senders.sender(for: .fcm) is NotificationHubsSender)
        #expect(!senders.isEmpty)
        let direct = try PushSenders(
            configuration: try AppConfiguration(
                environment: TestEnvironment.serverEnvironment(
                    database: try DatabaseURL(parsing: "postgres://bff@localhost:5432/unused"))
            ).features.push, outbound: OutboundHTTPConfiguration())
        #expect(direct.isEmpty && direct.sender(for: .apns) == nil)
    }

    @Test("connection strings as the portal gives them; anything else is refused")
    func connectionStrings() {
        let parsed = NotificationHubsSender.Connection(
            connectionString: "Endpoint=sb://learnapp.servicebus.windows.net/;SharedAccessKeyName=DefaultFullSharedAccessSignature;SharedAccessKey=abc=")
        #expect(parsed?.endpoint == "https://learnapp.servicebus.windows.net")
        #expect(parsed?.key == "abc=")
        for bad in ["", "Endpoint=sb://x/", "SharedAccessKeyName=a;SharedAccessKey=b", "Endpoint=ftp://x/;SharedAccessKeyName=a;SharedAccessKey=b"] {
            #expect(NotificationHubsSender.Connection(connectionString: bad) == nil, "\(bad)")
        }
    }
}
