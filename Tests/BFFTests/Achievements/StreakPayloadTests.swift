import Foundation
import NIOCore
import Testing

@testable import BFF

/// What the services are given for a streak push, by the same payload builders the recalls use
/// (Notification Hubs sends these payloads too): `type: streak`, the deep link, no recall's ids; and
/// a recall's payload byte for byte as before the push learned what it is about.
@Suite("Streak push payloads")
struct StreakPayloadTests {
    static let expires = Date(timeIntervalSince1970: 2_000_000_000)
    static let streak = StreakPush.message(day: "2025-05-02", streak: 3, language: .ja, deepLinkBase: "learnapp://", expiresAt: expires)

    static func object(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    @Test("APNs: the alert, type streak and the deep link beside aps, nothing of a recall")
    func apns() throws {
        let payload = try Self.object(APNsSender.payload(Self.streak))
        #expect(Set(payload.keys) == ["aps", "type", "deep_link"])
        #expect(payload["type"] as? String == "streak" && payload["deep_link"] as? String == "learnapp://achievements")
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect(aps["thread-id"] as? String == "streak")
        let alert = try #require(aps["alert"] as? [String: String])
        #expect(alert == ["title": "連続記録が途切れそう！", "body": "今日はまだ学習していません。1つ説明して、4日連続にしよう！"])
    }

    @Test("FCM: a notification message with type streak and the deep link as data, collapsing per day")
    func fcm() throws {
        let request = try Self.object(FCMSender.payload(Self.streak, token: "token-1"))
        let message = try #require(request["message"] as? [String: Any])
        #expect(message["data"] as? [String: String] == ["type": "streak", "deep_link": "learnapp://achievements"])
        #expect((message["android"] as? [String: Any])?["collapse_key"] as? String == "streak-2025-05-02")
        let headers = (message["apns"] as? [String: Any])?["headers"] as? [String: String]
        #expect(headers?["apns-collapse-id"] == "streak-2025-05-02" && headers?["apns-expiration"] == "2000000000")
        // Through the hub, without a token: the same message.
        let hub = try Self.object(FCMSender.payload(Self.streak, token: nil))
        #expect((hub["message"] as? [String: Any])?["token"] == nil)
    }

    @Test("a recall's payloads are what they were: the same bytes for APNs, the same data for FCM")
    func recallUnchanged() throws {
        let recallID = UUID(uuidString: "9B2E4F6A-1C3D-4E5F-8A7B-6C5D4E3F2A1B")!
        let chatID = UUID(uuidString: "7D4E1C2B-8A9F-4B3C-9D2E-1F0A6B5C4D3E")!
        let message = RecallDelivery.message(recallID: recallID, chatID: chatID, topic: "Waves", deepLinkBase: "learnapp://", now: Self.expires)
        let expected =
            #"{"aps":{"alert":{"title":"復習の時間です","body":"「Waves」をもう一度説明してみよう"},"sound":"default","thread-id":"recall"},"type":"recall","deep_link":"learnapp://chats/7d4e1c2b-8a9f-4b3c-9d2e-1f0a6b5c4d3e?recall=9b2e4f6a-1c3d-4e5f-8a7b-6c5d4e3f2a1b","recall_id":"9b2e4f6a-1c3d-4e5f-8a7b-6c5d4e3f2a1b","chat_id":"7d4e1c2b-8a9f-4b3c-9d2e-1f0a6b5c4d3e"}"#
        #expect(String(buffer: APNsSender.payload(message)) == expected)
        let fcm = try Self.object(FCMSender.payload(message, token: "token-1"))
        let data = (fcm["message"] as? [String: Any])?["data"] as? [String: String]
        #expect(
            data == [
                "type": "recall", "deep_link": "learnapp://chats/7d4e1c2b-8a9f-4b3c-9d2e-1f0a6b5c4d3e?recall=9b2e4f6a-1c3d-4e5f-8a7b-6c5d4e3f2a1b",
                "recall_id": "9b2e4f6a-1c3d-4e5f-8a7b-6c5d4e3f2a1b", "chat_id": "7d4e1c2b-8a9f-4b3c-9d2e-1f0a6b5c4d3e",
            ])
        let android = (fcm["message"] as? [String: Any])?["android"] as? [String: Any]
        #expect(android?["collapse_key"] as? String == "9b2e4f6a-1c3d-4e5f-8a7b-6c5d4e3f2a1b" && android?["priority"] as? String == "HIGH")
    }
}
