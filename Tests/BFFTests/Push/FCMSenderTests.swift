import Foundation
import NIOConcurrencyHelpers
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// `FCMSender` against a local FCM v1 server and OAuth token endpoint that check what they receive:
/// the assertion's RS256 signature and claims, the access token on each send, the message's shape.
@Suite("FCM sender", .timeLimit(.minutes(3)))
struct FCMSenderTests {
    static let token = "dXk8:APA91bH" + String(repeating: "q", count: 140)
    static let recallID = UUID()
    static let chatID = UUID()
    static let message = RecallDelivery.message(recallID: recallID, chatID: chatID, topic: "Photosynthesis", deepLinkBase: "learnapp://", now: Date())
    static let target = PushTarget(token: token, provider: .fcm)

    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    /// `timeout`: long enough for a loaded test machine; a stalled answer's test shortens it.
    func sender(_ fcm: LocalFCM, _ base: String, timeout: Duration = .seconds(20)) throws -> FCMSender {
        var sender = try FCMSender(
            credentialsFile: try fcm.credentialsFile(in: tls.directory, base: base), baseURL: base,
            http: try OutboundHTTP.client(extraCAFile: tls.certificatePath))
        sender.timeout = timeout
        return sender
    }

    static func fcmError(_ status: Int, _ code: String, fcmCode: String? = nil, field: String? = nil) -> ScriptedAnswer {
        var details: [String] = []
        if let fcmCode { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(fcmCode)"}"#) }
        if let field { details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)"}]}"#) }
        return .refuse(status: status, reason: #"{"error":{"code":\#(status),"message":"m","status":"\#(code)","details":[\#(details.joined(separator: ","))]}}"#)
    }

    @Test("an accepted message: one access token for many sends, the deep link and type: recall in data, priority HIGH, a collapse key per recall")
    func accepted() async throws {
        let fcm = LocalFCM()
        try await serveLocally(fcm.router, tls: tls) { base in
            let sender = try sender(fcm, base)
            for _ in 0..<3 { #expect(await sender.send(Self.message, to: Self.target) == .sent) }
        }
        #expect(fcm.violations.withLockedValue { $0 }.isEmpty)
        #expect(fcm.tokenRequests.withLockedValue { $0 } == 1)
        let received = fcm.received.withLockedValue { $0 }
        #expect(received.count == 3)
        let message = try #require(received.first?.message)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(message.utf8)) as? [String: Any])
        let body = try #require(object["message"] as? [String: Any])
        #expect(
            (body["data"] as? [String: Any])?["deep_link"] as? String
                == "learnapp://chats/\(Self.chatID.uuidString.lowercased())?recall=\(Self.recallID.uuidString.lowercased())")
        #expect((body["android"] as? [String: Any])?["collapse_key"] as? String == Self.recallID.uuidString.lowercased())
        #expect((body["android"] as? [String: Any])?["priority"] as? String == "HIGH")
        #expect((body["data"] as? [String: Any])?["type"] as? String == "recall")
    }

    @Test(
        "each of FCM's answers is one outcome",
        arguments: [
            (FCMSenderTests.fcmError(404, "NOT_FOUND", fcmCode: "UNREGISTERED"), "tokenDead"),
            (FCMSenderTests.fcmError(403, "PERMISSION_DENIED", fcmCode: "SENDER_ID_MISMATCH"), "tokenDead"),
            (FCMSenderTests.fcmError(400, "INVALID_ARGUMENT", fcmCode: "INVALID_ARGUMENT", field: "message.token"), "tokenDead"),
            (FCMSenderTests.fcmError(400, "INVALID_ARGUMENT", fcmCode: "INVALID_ARGUMENT", field: "message.data"), "payloadError"),
            (
                .refuse(
                    status: 429,
                    reason: #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#,
                    retryAfter: 60), "retry after 60"
            ),
            (FCMSenderTests.fcmError(503, "UNAVAILABLE", fcmCode: "UNAVAILABLE"), "retry"),
            (FCMSenderTests.fcmError(500, "INTERNAL", fcmCode: "INTERNAL"), "retry"),
            (FCMSenderTests.fcmError(401, "UNAUTHENTICATED", fcmCode: "THIRD_PARTY_AUTH_ERROR"), "configurationError"),
            (.garbage(status: 502), "retry"),
            (.stall(.seconds(3)), "retry"),
            (.drop, "retry"),
        ])
    func answers(_ answer: ScriptedAnswer, _ expected: String) async throws {
        let fcm = LocalFCM { _, _ in answer }
        let outcome = try await serveLocally(fcm.router, tls: tls) { base in
            try await sender(fcm, base, timeout: answer.isStall ? .seconds(1) : .seconds(20)).send(Self.message, to: Self.target)
        }
        #expect(outcome.kind == expected, "\(outcome)")
    }

    @Test("an access token refused early (401 UNAUTHENTICATED) is replaced once and the message sent")
    func refusedAccessToken() async throws {
        let fcm = LocalFCM()
        try await serveLocally(fcm.router, tls: tls) { base in
            let sender = try sender(fcm, base)
            #expect(await sender.send(Self.message, to: Self.target) == .sent)
            fcm.revoked.withLockedValue { $0.formUnion(fcm.issued.withLockedValue { $0 }) }
            #expect(await sender.send(Self.message, to: Self.target) == .sent)
        }
        #expect(fcm.tokenRequests.withLockedValue { $0 } == 2)
    }

    @Test("the token endpoint: a refused grant is a configuration error, an outage a retry")
    func tokenEndpoint() async throws {
        let refused = LocalFCM()
        refused.oauthAnswer.withLockedValue { $0 = .refuse(status: 400, reason: #"{"error":"invalid_grant"}"#) }
        let down = LocalFCM()
        down.oauthAnswer.withLockedValue { $0 = .garbage(status: 503) }
        let outcomes = try await serveLocally(refused.router, tls: tls) { base in
            try await sender(refused, base).send(Self.message, to: Self.target)
        }
        #expect(outcomes == .configurationError("the OAuth token endpoint answered 400 invalid_grant"))
        let outage = try await serveLocally(down.router, tls: tls) { base in
            try await sender(down, base).send(Self.message, to: Self.target)
        }
        guard case .retry = outage else {
            Issue.record("expected a retry, got \(outage)")
            return
        }
        #expect(refused.received.withLockedValue { $0 }.isEmpty && down.received.withLockedValue { $0 }.isEmpty)
    }
}
