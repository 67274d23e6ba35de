import Foundation
import NIOCore
import NIOHTTP1
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// `NotificationHubsClient` against the local hub: installations as the hub keeps them, a recall's
/// tag send with the direct route's payloads, and each of the hub's answers mapped to one outcome.
@Suite("Notification Hubs client", .timeLimit(.minutes(3)))
struct NotificationHubsClientTests {
    static let userID = UUID()
    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    func client(_ hubs: LocalNotificationHubs, _ base: String, key: String? = nil, timeout: Duration = .seconds(20)) throws -> NotificationHubsClient {
        var text = hubs.connectionString(base: base)
        if let key { text = text.replacingOccurrences(of: hubs.key, with: key) }
        let connection = try #require(NotificationHubsSender.Connection(connectionString: text))
        var client = NotificationHubsClient(connection: connection, hub: hubs.hub, http: try OutboundHTTP.client(extraCAFile: tls.certificatePath))
        client.timeout = timeout
        return client
    }

    static func installation(_ device: String, _ provider: PushTokenRegistration.Provider, user: UUID = userID) -> NotificationHubsClient.Installation {
        let token = provider == .apns ? NotificationHubsSenderTests.apns.token : NotificationHubsSenderTests.fcm.token + device
        return NotificationHubsClient.installation(deviceID: device, userID: user, token: token, provider: provider)
    }

    @Test("PUT creates and overwrites a device's installation with its platform, token and the learner's tag; DELETE removes it, twice over")
    func installations() async throws {
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let client = try client(hubs, base)
            #expect(await client.put(Self.installation("phone-1234abcd", .fcm)) == .applied)
            #expect(await client.put(Self.installation("phone-1234abcd", .apns)) == .applied)
            #expect(
                hubs.installations.withLockedValue { $0 } == [
                    "phone-1234abcd": .init(
                        installationId: "phone-1234abcd", platform: "apns", pushChannel: NotificationHubsSenderTests.apns.token,
                        tags: ["user:\(Self.userID.uuidString.lowercased())"])
                ])
            #expect(await client.deleteInstallation("phone-1234abcd") == .applied)
            #expect(await client.deleteInstallation("phone-1234abcd") == .applied)
            #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a recall's tag send per platform reaches the learner's installations of that platform; the collapse id is the recall's")
    func tagSend() async throws {
        let hubs = LocalNotificationHubs()
        let message = NotificationHubsSenderTests.message
        try await serveLocally(hubs.router, tls: tls) { base in
            let client = try client(hubs, base)
            for installation in [
                Self.installation("phone-1234abcd", .apns), Self.installation("tablet-1234abcd", .fcm), Self.installation("ipad-1234abcd", .fcm),
                Self.installation("other-1234abcd", .fcm, user: UUID()),
            ] {
                #expect(await client.put(installation) == .applied)
            }
            #expect(await client.sendRecall(message, toUser: Self.userID, platform: .fcmv1) == .sent)
            #expect(await client.sendRecall(message, toUser: Self.userID, platform: .apns) == .sent)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
        let sends = hubs.tagSends.withLockedValue { $0 }
        #expect(sends.map(\.format) == ["fcmv1", "apple"])
        #expect(sends.map(\.tags) == Array(repeating: "user:\(Self.userID.uuidString.lowercased())", count: 2))
        #expect(sends.map(\.reached) == [["ipad-1234abcd", "tablet-1234abcd"], ["phone-1234abcd"]])
        let recall = try #require(message.recallID).uuidString.lowercased()
        #expect(message.collapseID == recall)
        let fcm = try #require(try JSONSerialization.jsonObject(with: Data(sends[0].payload.utf8)) as? [String: Any])
        let android = (fcm["message"] as? [String: Any])?["android"] as? [String: Any]
        #expect(android?["collapse_key"] as? String == recall)
        #expect(((fcm["message"] as? [String: Any])?["data"] as? [String: Any])?["recall_id"] as? String == recall)
        let apple = try #require(try JSONSerialization.jsonObject(with: Data(sends[1].payload.utf8)) as? [String: Any])
        #expect(apple["aps"] is [String: Any] && apple["type"] as? String == "recall")
    }

    @Test(
        "each of the hub's answers to an installation is one outcome",
        arguments: [
            (ScriptedAnswer.refuse(status: 400, reason: ""), "refused"),
            (.refuse(status: 401, reason: ""), "configurationError"),
            (.refuse(status: 403, reason: "quota", retryAfter: 30), "retry after 30"),
            (.refuse(status: 404, reason: ""), "configurationError"),
            (.refuse(status: 410, reason: ""), "configurationError"),
            (.refuse(status: 413, reason: ""), "refused"),
            (.refuse(status: 429, reason: "", retryAfter: 10), "retry after 10"),
            (.refuse(status: 503, reason: ""), "retry"),
            (.garbage(status: 500), "retry"),
            (.stall(.seconds(3)), "retry"),
            (.drop, "retry"),
        ])
    func installationAnswers(_ answer: ScriptedAnswer, _ expected: String) async throws {
        let hubs = LocalNotificationHubs(operation: { _, _ in answer })
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await client(hubs, base, timeout: answer.isStall ? .seconds(1) : .seconds(20)).put(Self.installation("phone-1234abcd", .fcm))
        }
        #expect(outcome.kind == expected, "\(outcome)")
        #expect(hubs.installations.withLockedValue { $0 }.isEmpty || answer.isStall)
    }

    @Test("a DELETE the hub answers 404 has the absence it asked for")
    func deleteOfNone() async throws {
        let hubs = LocalNotificationHubs(operation: { _, _ in .refuse(status: 404, reason: "") })
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await client(hubs, base).deleteInstallation("phone-1234abcd")
        }
        #expect(outcome == .applied)
    }

    @Test(
        "each of the hub's answers to a tag send is one outcome, never a dead token",
        arguments: [
            (ScriptedAnswer.refuse(status: 400, reason: ""), "payloadError"),
            (.refuse(status: 401, reason: ""), "configurationError"),
            (.refuse(status: 403, reason: "quota"), "retry"),
            (.refuse(status: 404, reason: ""), "configurationError"),
            (.refuse(status: 410, reason: ""), "configurationError"),
            (.refuse(status: 413, reason: ""), "payloadError"),
            (.refuse(status: 429, reason: "", retryAfter: 10), "retry after 10"),
            (.refuse(status: 500, reason: ""), "retry"),
            (.stall(.seconds(3)), "retry"),
            (.drop, "retry"),
        ])
    func sendAnswers(_ answer: ScriptedAnswer, _ expected: String) async throws {
        let hubs = LocalNotificationHubs(operation: { _, _ in answer })
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await client(hubs, base, timeout: answer.isStall ? .seconds(1) : .seconds(20))
                .sendRecall(NotificationHubsSenderTests.message, toUser: Self.userID, platform: .fcmv1)
        }
        #expect(outcome.kind == expected, "\(outcome)")
    }

    @Test("a SAS token signed with another key is refused: a configuration error, and the hub keeps nothing")
    func wrongKey() async throws {
        let hubs = LocalNotificationHubs()
        let outcome = try await serveLocally(hubs.router, tls: tls) { base in
            try await client(hubs, base, key: Data(repeating: 7, count: 32).base64EncodedString()).put(Self.installation("phone-1234abcd", .apns))
        }
        #expect(outcome == .configurationError("401 from Notification Hubs (PUT installation)"))
        #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
    }
}

extension NotificationHubsClient.InstallationOutcome {
    /// The outcome's kind, with a retry's `Retry-After`, for the tables of answers.
    var kind: String {
        switch self {
        case .applied: "applied"
        case .retry(_, let after?): "retry after \(after.components.seconds)"
        case .retry: "retry"
        case .configurationError: "configurationError"
        case .refused: "refused"
        }
    }
}
