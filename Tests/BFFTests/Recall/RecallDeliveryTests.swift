import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

/// The re-recall's last hop on a real database and job runtime: a recall that comes due is pushed
/// once to each of the learner's devices with its deep link, each service answer has its effect, and
/// a delivery run again pushes only to the devices whose push failed.
/// The push services here are `PushSender`s that answer as scripted and record what they were given;
/// the protocols themselves are tested against local servers in the senders' own suites.
@Suite("Re-recall delivery", .needsDatabase, .timeLimit(.minutes(3)))
struct RecallDeliveryTests {
    let url: DatabaseURL

    init() async throws {
        url = try await TestDatabases.shared.makeMigrated()
    }

    init(database: DatabaseURL) {
        url = database
    }

    final class ScriptedSender: PushSender {
        let pushes = NIOLockedValueBox<[(PushMessage, PushTarget)]>([])
        let answer: @Sendable (PushTarget, Int) -> PushOutcome

        init(_ answer: @escaping @Sendable (PushTarget, Int) -> PushOutcome = { _, _ in .sent }) {
            self.answer = answer
        }

        func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
            let count = pushes.withLockedValue { pushes in
                pushes.append((message, target))
                return pushes.filter { $0.1 == target }.count
            }
            return answer(target, count)
        }

        var targets: [PushTarget] { pushes.withLockedValue { $0.map(\.1) } }
    }

    /// Two devices of one learner, an APNs and an FCM token, both registered.
    struct TwoDevices: Sendable {
        let userID: UUID
        let phone: Learner
        let tablet: Learner
        static let apnsToken = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
        static let fcmToken = "tablet-7f3c:APA91b" + String(repeating: "t", count: 120)
    }

    func twoDevices(_ client: some TestClientProtocol) async throws -> TwoDevices {
        try await twoDevices(client, database: url)
    }

    func twoDevices(_ client: some TestClientProtocol, database url: DatabaseURL) async throws -> TwoDevices {
        let userID = UUID()
        let environment = TestEnvironment.serverEnvironment(database: url, ["BFF_LOG_LEVEL": "critical"])
        let devices = ["phone-\(userID.uuidString.prefix(8))", "tablet-\(userID.uuidString.prefix(8))"]
        let pairs = try await Commands.issueTokens(environment: environment, for: devices.map { (userID, $0) }, scopes: AccessTokens.allScopes)
        let phone = Learner(id: userID, accessToken: pairs[0].accessToken)
        let tablet = Learner(id: userID, accessToken: pairs[1].accessToken)
        let bodies = [
            (phone, #"{"token":"\#(TwoDevices.apnsToken)","platform":"ios","device_id":"\#(devices[0])"}"#),
            (tablet, #"{"token":"\#(TwoDevices.fcmToken)","platform":"android","device_id":"\#(devices[1])"}"#),
        ]
        for (learner, body) in bodies {
            let response = try await client.call(.post, "/api/v1/push/register", as: learner, json: body)
            #expect(response.status == .noContent)
        }
        return TwoDevices(userID: userID, phone: phone, tablet: tablet)
    }

    func worker(_ database: Database, _ sender: ScriptedSender) -> JobWorker {
        let delivery = RecallDelivery(
            database: database, senders: PushSenders(apns: sender, fcm: sender), deepLinkBase: "learnapp://", pushConcurrency: 4,
            logger: TestEnvironment.quietLogger)
        var configuration = JobRuntimeConfiguration(concurrency: 4, pollInterval: .milliseconds(100), lease: .seconds(30), drain: .seconds(2))
        configuration.backoff = Backoff(base: .milliseconds(20), cap: .milliseconds(200))
        return JobWorker(database: database, databaseURL: url, handlers: delivery.handlers, configuration: configuration, logger: TestEnvironment.quietLogger)
    }

    /// Runs `body` against a live app (no workers of its own) and `worker`.
    func withLoop(_ sender: ScriptedSender, _ body: @escaping @Sendable (any TestClientProtocol, ChatStore) async throws -> Void) async throws {
        let database = Database(client: PostgresClient(configuration: url.clientConfiguration(poolSize: 4)), timeout: .seconds(10))
        let repository = ChatStore.withOwnBatcher(database)
        let worker = worker(database, sender)
        let app = try await makeTestApp(database: url, environment: ["BFF_JOBS_CONCURRENCY": "0", "BFF_RECALL_BASE_INTERVAL": "1"])
        try await Commands.withDatabase(database.client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                defer { worker.stop() }
                try await app.live { client async throws in try await body(client, repository) }
            }
        }
    }

    func status(_ client: some TestClientProtocol, _ learner: Learner, _ recall: String) async throws -> String? {
        try await client.call(.get, "/api/v1/recalls/\(recall)", as: learner).json["status"] as? String
    }

    @Test("a due recall is pushed once to each device, with the deep link and a collapse id per recall; then it is sent")
    func pushedOncePerDevice() async throws {
        let sender = ScriptedSender()
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
            // A weak first evaluation: due in a quarter of the base interval, a fraction of a second.
            let chat = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
            let recall = try #require(try await RecallTests.recalls(client, learner.phone).first?["id"] as? String)
            #expect(try await eventually { try await status(client, learner.phone, recall) == "sent" })
            #expect(try await eventually { sender.targets.count == 2 })
            // Nothing more arrives: each (recall, token) is pushed once.
            try await Task.sleep(for: .milliseconds(500))
            let pushes = sender.pushes.withLockedValue { $0 }
            #expect(Set(pushes.map(\.1)) == [PushTarget(token: TwoDevices.apnsToken, provider: .apns), PushTarget(token: TwoDevices.fcmToken, provider: .fcm)])
            #expect(pushes.count == 2)
            for (message, _) in pushes {
                #expect(message.deepLink == "learnapp://chats/\(chat)?recall=\(recall)")
                #expect(message.collapseID == recall)
                #expect(!message.body.contains("Forces and motion"), "the chat's title is the learner's, never pushed")
                #expect(message.title == "復習の時間です")
            }
        }
    }

    @Test("a push, which answers no request, is in the learner's language setting: English names and sentences for an English learner")
    func pushInTheLearnersLanguage() async throws {
        let sender = ScriptedSender()
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            let english = RecallTests.windowAroundNow().dropLast() + #","language":"en"}"#
            // The request itself asks for Japanese: the push still follows the setting.
            let stored = try await client.call(.put, "/api/v1/settings", as: learner.phone, json: String(english), headers: [.acceptLanguage: "ja"])
            #expect(stored.status == .ok && stored.json["language"] as? String == "en")
            _ = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1, chat: #"{"subject_id":"physics","topic_id":"physics.forces"}"#)
            #expect(try await eventually { sender.targets.count == 2 })
            for (message, _) in sender.pushes.withLockedValue({ $0 }) {
                #expect(message.title == "Time to review")
                #expect(message.body == "Try explaining “Forces and Newton's laws” once more")
            }
        }
    }

    @Test("the push names the chat's topic, else its subject, else a fixed line, and never the learner's own chat title")
    func pushTextWithoutTheTitle() async throws {
        let sender = ScriptedSender()
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
            // Titles as learners write them (an automatic one is their first message's start).
            let title = "まいの失恋と宿題の話"
            let chats = [
                (#"{"title":"\#(title) 1","subject_id":"physics","topic_id":"physics.forces"}"#, "「力と運動の法則」をもう一度説明してみよう"),
                (#"{"title":"\#(title) 2","subject_id":"chemistry"}"#, "「化学」をもう一度説明してみよう"),
                (#"{"title":"\#(title) 3"}"#, "前に学んだことをもう一度説明してみよう"),
            ]
            var expected: [UUID: String] = [:]
            for (json, body) in chats {
                let chat = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1, chat: json)
                expected[try #require(UUID(uuidString: chat))] = body
            }
            #expect(try await eventually { sender.targets.count == 6 })
            let pushes = sender.pushes.withLockedValue { $0 }
            #expect(pushes.count == 6)
            for (message, target) in pushes {
                let chatID = try #require(message.chatID)
                #expect(message.body == expected[chatID], "\(target.provider)")
                #expect(!message.body.contains(title) && !message.title.contains(title))
            }
        }
    }

    @Test("notifications off: the recall comes due, stays scheduled and listed, and nothing is pushed")
    func notificationsOff() async throws {
        let sender = ScriptedSender()
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            let off = String(RecallTests.windowAroundNow().dropLast()) + #","notifications_enabled":false}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: off).status == .ok)
            _ = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
            let recall = try #require(try await RecallTests.recalls(client, learner.phone).first)
            let due = try #require(RFC3339Dates.dateOrNil(recall["due_at"] as? String))
            // Its delivery job ran (and did nothing).
            #expect(
                try await eventually {
                    try await url.withClient { client in
                        var done = false
                        for try await state in try await client.query("SELECT state FROM jobs WHERE kind = 'recall.deliver'").decode(String.self) {
                            done = state == "completed"
                        }
                        return done
                    }
                })
            #expect(Date() > due)
            #expect(sender.targets.isEmpty)
            #expect(try await status(client, learner.phone, recall["id"] as! String) == "scheduled")
        }
    }

    @Test("a dead token is deleted and not pushed again; a 429 with Retry-After is retried and then sent")
    func deadTokenAndRetry() async throws {
        let sender = ScriptedSender { target, count in
            switch (target.provider, count) {
            case (.apns, _): .tokenDead("410 Unregistered")
            case (.fcm, 1): .retry("429 QUOTA_EXCEEDED", after: .milliseconds(300))
            case (.fcm, _): .sent
            }
        }
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
            _ = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
            let recall = try #require(try await RecallTests.recalls(client, learner.phone).first?["id"] as? String)
            #expect(try await eventually { try await status(client, learner.phone, recall) == "sent" })
            let tokens = try await PushTokenStore(database: repository.database).tokens(userID: learner.userID)
            #expect(tokens.map(\.token) == [TwoDevices.fcmToken])
            let pushes = sender.targets
            #expect(pushes.filter { $0.provider == .apns }.count == 1)
            #expect(pushes.filter { $0.provider == .fcm }.count == 2)
            let outcomes = try await recordedOutcomes(of: try #require(UUID(uuidString: recall)), userID: learner.userID)
            #expect(outcomes[PushOutcomeStore.tokenKey(TwoDevices.apnsToken)]?.outcome == "dead")
            #expect(outcomes[PushOutcomeStore.tokenKey(TwoDevices.fcmToken)] == RecordedOutcome(outcome: "accepted", attempts: 2, provider: "fcm", error: nil))
        }
    }

    @Test("refused credentials dead-letter the recall's delivery with the reason, the tokens kept, the recall still scheduled")
    func configurationErrorDeadLetters() async throws {
        let sender = ScriptedSender { _, _ in .configurationError("403 InvalidProviderToken") }
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
            _ = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
            let recall = try #require(try await RecallTests.recalls(client, learner.phone).first?["id"] as? String)
            // One job for the recall, dead with the services' one reason, however many devices refused.
            #expect(
                try await eventually {
                    try await url.withClient { client in
                        var dead: [String?] = []
                        for try await error in try await client.query(
                            "SELECT last_error FROM jobs WHERE kind = \(RecallDelivery.deliverKind) AND state = 'dead'"
                        ).decode(String?.self) { dead.append(error) }
                        return dead == ["configuration: 403 InvalidProviderToken"]
                    }
                })
            #expect(sender.targets.count == 2)
            #expect(try await PushTokenStore(database: repository.database).tokens(userID: learner.userID).count == 2)
            #expect(try await status(client, learner.phone, recall) == "scheduled")
            let outcomes = try await recordedOutcomes(of: try #require(UUID(uuidString: recall)), userID: learner.userID)
            #expect(outcomes.values.map(\.outcome) == ["error", "error"])
            #expect(outcomes.values.allSatisfy { $0.error == "configuration: 403 InvalidProviderToken" })
        }
    }

    @Test("three devices, one answering 429: only that one is pushed again; each outcome is in recall_pushes under its token's key, never the token")
    func onlyTheThrottledDeviceAgain() async throws {
        let third = "third-9c1e:APA91b" + String(repeating: "u", count: 120)
        let sender = ScriptedSender { target, count in
            target.token == third && count == 1 ? .retry("429 QUOTA_EXCEEDED", after: .milliseconds(300)) : .sent
        }
        try await withLoop(sender) { client, repository in
            let learner = try await twoDevices(client)
            // A third device, registered as the app would have.
            try await url.withClient { client in
                _ = try await client.query(
                    """
                    INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
                    VALUES (\(learner.userID), \(third), 'android', 'fcm', \("third-\(learner.userID.uuidString.prefix(8))"))
                    """)
            }
            #expect(try await client.call(.put, "/api/v1/settings", as: learner.phone, json: RecallTests.windowAroundNow()).status == .ok)
            _ = try await RecallTests.evaluatedChat(client, learner.phone, repository, score: 1)
            let recall = try #require(try await RecallTests.recalls(client, learner.phone).first?["id"] as? String)
            let recallID = try #require(UUID(uuidString: recall))
            #expect(try await eventually { try await status(client, learner.phone, recall) == "sent" })
            #expect(try await eventually { sender.targets.filter { $0.token == third }.count == 2 })
            #expect(
                try await eventually {
                    try await url.withClient { client in
                        var state = ""
                        for try await value in try await client.query(
                            "SELECT state FROM jobs WHERE kind = \(RecallDelivery.deliverKind) AND user_id = \(learner.userID)"
                        ).decode(String.self) { state = value }
                        return state == "completed"
                    }
                })
            let pushes = sender.targets
            #expect(pushes.filter { $0.token == TwoDevices.apnsToken }.count == 1)
            #expect(pushes.filter { $0.token == TwoDevices.fcmToken }.count == 1)
            #expect(pushes.filter { $0.token == third }.count == 2)

            let outcomes = try await recordedOutcomes(of: recallID, userID: learner.userID)
            #expect(outcomes.count == 3)
            #expect(outcomes[PushOutcomeStore.tokenKey(TwoDevices.apnsToken)] == RecordedOutcome(outcome: "accepted", attempts: 1, provider: "apns", error: nil))
            #expect(outcomes[PushOutcomeStore.tokenKey(TwoDevices.fcmToken)] == RecordedOutcome(outcome: "accepted", attempts: 1, provider: "fcm", error: nil))
            #expect(outcomes[PushOutcomeStore.tokenKey(third)] == RecordedOutcome(outcome: "accepted", attempts: 2, provider: "fcm", error: nil))
            // A token is a credential: no column of the table holds one, whole or in part.
            let tokens = [TwoDevices.apnsToken, TwoDevices.fcmToken, third]
            let leaked = try await url.withClient { client in
                var leaked = -1
                for try await count in try await client.query(
                    """
                    SELECT count(*)::int FROM recall_pushes r, unnest(\(tokens)::text[]) AS t(token)
                    WHERE strpos(r::text, left(t.token, 32)) > 0
                    """
                ).decode(Int.self) { leaked = count }
                return leaked
            }
            #expect(leaked == 0)
        }
    }

    struct RecordedOutcome: Sendable, Equatable {
        let outcome: String
        let attempts: Int
        let provider: String
        let error: String?
    }

    /// `recall_pushes` of one recall, by token key.
    func recordedOutcomes(of recallID: UUID, userID: UUID) async throws -> [String: RecordedOutcome] {
        try await url.withClient { client in
            var outcomes: [String: RecordedOutcome] = [:]
            for try await (key, outcome, attempts, provider, error) in try await client.query(
                "SELECT token_key, outcome, attempts, provider, error FROM recall_pushes WHERE recall_id = \(recallID) AND user_id = \(userID)"
            ).decode((String, String, Int32, String, String?).self) {
                outcomes[key] = RecordedOutcome(outcome: outcome, attempts: Int(attempts), provider: provider, error: error)
            }
            return outcomes
        }
    }
}
