import Crypto
import Foundation
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

/// The streak's encouragement push on a real database and job runtime: the sweep queues a learner
/// whose streak breaks tonight once their window's evening part begins, and the job pushes once to
/// each device with `type: streak` and nothing the learner wrote; never with notifications off,
/// outside the window, when today is done, or twice a day. The push services are scripted senders;
/// the payloads are held to the services' formats in `StreakPayloadTests`.
@Suite("Streak push", .needsDatabase, .timeLimit(.minutes(3)))
struct StreakPushTests {
    typealias ScriptedSender = RecallDeliveryTests.ScriptedSender

    let url: DatabaseURL

    init() async throws {
        url = try await TestDatabases.shared.makeMigrated()
    }

    /// What the learner wrote yesterday: never in a push.
    static let secret = "ぼくの秘密のノートの話"

    struct Setup: Sendable {
        let learner: Learner
        let facts: LearnerFacts
        let apnsToken: String
        let fcmToken: String
        var targets: Set<PushTarget> {
            [PushTarget(token: apnsToken, provider: .apns), PushTarget(token: fcmToken, provider: .fcm)]
        }
    }

    /// `HH:MM` in UTC, `minutes` from now.
    static func clock(minutesFromNow minutes: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.hour, .minute], from: Date().addingTimeInterval(Double(minutes * 60)))
        return String(format: "%02d:%02d", parts.hour!, parts.minute!)
    }

    /// A learner in UTC with an APNs and an FCM token, their window three hours long and begun
    /// `windowBegan` minutes ago (the whole of it is the evening part), who explained something
    /// yesterday and, when `today`, today too.
    func learner(windowBegan: Int = 10, notifications: Bool = true, today: Bool = false, language: String = "ja") async throws -> Setup {
        let learner = try await Learner.make(database: url)
        let facts = LearnerFacts(url, learner)
        try await facts.settings(
            zone: "UTC", language: language, start: Self.clock(minutesFromNow: -windowBegan), end: Self.clock(minutesFromNow: 180 - windowBegan),
            notifications: notifications)
        let apns = SHA256.hash(data: Data(learner.id.uuidString.utf8)).map { String(format: "%02x", $0) }.joined()
        let fcm = "streak-\(learner.id.uuidString.prefix(8)):APA91b" + String(repeating: "s", count: 120)
        try await facts.pushToken(apns, provider: "apns")
        try await facts.pushToken(fcm, provider: "fcm")
        let chat = try await facts.chat()
        try await facts.turn(in: chat, at: LearnerFacts.noon(daysAgo: 1, in: "UTC"), text: Self.secret)
        if today { try await facts.turn(in: chat, at: LearnerFacts.now) }
        return Setup(learner: learner, facts: facts, apnsToken: apns, fcmToken: fcm)
    }

    /// Runs `body` with a job worker running the streak pushes through `sender`, and the sweep.
    func withWorker(
        _ sender: ScriptedSender, _ body: @escaping @Sendable (Database, StreakSweep) async throws -> Void
    ) async throws {
        let quiet = TestEnvironment.quietLogger
        let database = Database(client: PostgresClient(configuration: url.clientConfiguration(poolSize: 4)), timeout: .seconds(10))
        let push = StreakPush(
            achievements: AchievementStore(database: database, logger: quiet), store: StreakPushStore(database: database, logger: quiet),
            tokens: PushTokenStore(database: database), senders: PushSenders(apns: sender, fcm: sender), permits: PushPermits(4),
            deepLinkBase: "learnapp://", pushConcurrency: 4, logger: quiet)
        let sweep = StreakSweep(store: StreakPushStore(database: database, logger: quiet), interval: .seconds(900), logger: quiet)
        var configuration = JobRuntimeConfiguration(concurrency: 4, pollInterval: .milliseconds(100), lease: .seconds(30), drain: .seconds(2))
        configuration.backoff = Backoff(base: .milliseconds(20), cap: .milliseconds(200))
        let worker = JobWorker(database: database, databaseURL: url, handlers: [push.handler], configuration: configuration, logger: quiet)
        try await Commands.withDatabase(database.client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                defer { worker.stop() }
                try await body(database, sweep)
            }
        }
    }

    /// The learner's day in UTC, as the jobs name it.
    func today() async throws -> String {
        try await url.withClient { client in
            for try await day in try await client.query("SELECT (now() AT TIME ZONE 'UTC')::date::text").decode(String.self) { return day }
            throw TestSetupError("no date")
        }
    }

    /// The states of the learner's streak push jobs, oldest first.
    func jobs(of learner: Learner) async throws -> [String] {
        try await url.withClient { client in
            var states: [String] = []
            for try await state in try await client.query(
                "SELECT state FROM jobs WHERE kind = \(StreakPush.kind) AND user_id = \(learner.id) ORDER BY id"
            ).decode(String.self) { states.append(state) }
            return states
        }
    }

    /// A push job for the learner and `day` queued by hand, as a second sweep or a retry would run it.
    func enqueue(_ learner: Learner, day: String, key: String) async throws {
        try await url.withClient { client in
            try await client.withConnection { connection in
                _ = try await JobQueue.enqueue(
                    StreakPush.kind, StreakPush.Args(day: day), options: .init(userID: learner.id, uniqueKey: key),
                    on: connection, logger: TestEnvironment.quietLogger)
            }
        }
    }

    /// Waits until every streak push job of the learner has finished; their states.
    func finished(_ learner: Learner) async throws -> [String] {
        _ = try await eventually { try await jobs(of: learner).allSatisfy { $0 != "available" && $0 != "running" } }
        return try await jobs(of: learner)
    }

    @Test("a streak that breaks tonight: one push to each device in the window, type streak, the learner's language, no word of theirs; not twice that day")
    func sentOnce() async throws {
        let sender = ScriptedSender()
        let setup = try await learner()
        let day = try await today()
        try await withWorker(sender) { _, sweep in
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 1)
            #expect(try await eventually { sender.targets.count == 2 })
            #expect(try await finished(setup.learner) == ["completed"])
            // Another pass, and a job of the same day run again: nothing more.
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 0)
            try await enqueue(setup.learner, day: day, key: "again")
            #expect(try await finished(setup.learner) == ["completed", "completed"])
            let pushes = sender.pushes.withLockedValue { $0 }
            #expect(pushes.count == 2 && Set(pushes.map(\.1)) == setup.targets)
            for (message, _) in pushes {
                #expect(message.kind == .streak && message.recallID == nil && message.chatID == nil)
                #expect(message.title == "連続記録が途切れそう！")
                #expect(message.body == Phrase.streakPushBody(days: 1).text(in: .ja))
                #expect(!message.title.contains(Self.secret) && !message.body.contains(Self.secret))
                #expect(message.deepLink == "learnapp://achievements" && message.collapseID == "streak-\(day)")
                #expect(message.expiresAt > Date() && message.expiresAt <= Date().addingTimeInterval(86_400))
            }
            let row = try await url.withClient { client in
                for try await row in try await client.query(
                    "SELECT streak, cardinality(accepted_keys), sent_at IS NOT NULL FROM streak_pushes WHERE user_id = \(setup.learner.id) AND day = \(day)::date"
                ).decode((Int32, Int32, Bool).self) { return row }
                throw TestSetupError("no streak_pushes row")
            }
            #expect(row.0 == 1 && row.1 == 2 && row.2)
        }
    }

    @Test("English for a learner whose language is English; the streak's length in the words")
    func inEnglish() async throws {
        let sender = ScriptedSender()
        let setup = try await learner(language: "en")
        // Two days before yesterday too: a 3-day streak.
        let chat = try await setup.facts.chat()
        for daysAgo in [3, 2] { try await setup.facts.turn(in: chat, at: LearnerFacts.noon(daysAgo: daysAgo, in: "UTC")) }
        try await withWorker(sender) { _, sweep in
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 1)
            #expect(try await eventually { sender.targets.count == 2 })
            let message = try #require(sender.pushes.withLockedValue { $0.first?.0 })
            #expect(message.title == "Keep your streak going")
            #expect(message.body == "You haven't studied today yet. Explain one thing to make it 4 days in a row.")
        }
    }

    @Test("nothing with notifications off, outside the window, or when today is done: the sweep queues none, and a job queued anyway pushes none")
    func notSent() async throws {
        let sender = ScriptedSender()
        let off = try await learner(notifications: false)
        let closed = try await learner(windowBegan: 200)
        let done = try await learner(today: true)
        let day = try await today()
        try await withWorker(sender) { _, sweep in
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 0)
            for setup in [off, closed, done] {
                try await enqueue(setup.learner, day: day, key: "by-hand-\(setup.learner.id)")
                let states = try await finished(setup.learner)
                #expect(states == ["completed"], "\(states)")
            }
            #expect(sender.targets.isEmpty)
            let rows = try await off.facts.count("SELECT count(*)::int FROM streak_pushes")
            #expect(rows == 0)
        }
    }

    @Test("a learner whose evening began long ago is not looked at again, nor one without a streak")
    func notLookedAt() async throws {
        let sender = ScriptedSender()
        let late = try await learner(windowBegan: 150)
        let fresh = try await Learner.make(database: url)
        let facts = LearnerFacts(url, fresh)
        try await facts.settings(zone: "UTC", start: Self.clock(minutesFromNow: -10), end: Self.clock(minutesFromNow: 170))
        try await facts.pushToken("fresh-\(fresh.id.uuidString.prefix(8)):APA91b" + String(repeating: "f", count: 100), provider: "fcm")
        try await withWorker(sender) { _, sweep in
            let queued = try await sweep.sweep(lookback: .seconds(1_800))
            let lateJobs = try await jobs(of: late.learner), freshJobs = try await jobs(of: fresh)
            #expect(queued == 0)
            #expect(lateJobs.isEmpty && freshJobs.isEmpty)
        }
    }

    @Test("a dead token is deleted; a 429 with Retry-After is retried for that device alone and then sent")
    func deadTokenAndRetry() async throws {
        let sender = ScriptedSender { target, count in
            switch (target.provider, count) {
            case (.apns, _): .tokenDead("410 Unregistered")
            case (.fcm, 1): .retry("429 QUOTA_EXCEEDED", after: .milliseconds(300))
            case (.fcm, _): .sent
            }
        }
        let setup = try await learner()
        try await withWorker(sender) { database, sweep in
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 1)
            #expect(try await finished(setup.learner) == ["completed"])
            let pushes = sender.targets
            #expect(pushes.filter { $0.provider == .apns }.count == 1 && pushes.filter { $0.provider == .fcm }.count == 2)
            let tokens = try await PushTokenStore(database: database).tokens(userID: setup.learner.id)
            #expect(tokens.map(\.token) == [setup.fcmToken])
            let accepted = try await url.withClient { client in
                for try await keys in try await client.query(
                    "SELECT accepted_keys FROM streak_pushes WHERE user_id = \(setup.learner.id)"
                ).decode([String].self) { return keys }
                return []
            }
            #expect(accepted == [PushOutcomeStore.tokenKey(setup.fcmToken)])
        }
    }

    @Test("refused credentials dead-letter the push job with the reason, the tokens kept")
    func configurationError() async throws {
        let sender = ScriptedSender { _, _ in .configurationError("403 InvalidProviderToken") }
        let setup = try await learner()
        try await withWorker(sender) { database, sweep in
            #expect(try await sweep.sweep(lookback: .seconds(1_800)) == 1)
            #expect(try await finished(setup.learner) == ["dead"])
            let reason = try await url.withClient { client in
                for try await error in try await client.query(
                    "SELECT last_error FROM jobs WHERE kind = \(StreakPush.kind) AND user_id = \(setup.learner.id)"
                ).decode(String?.self) { return error }
                return nil
            }
            #expect(reason == "configuration: 403 InvalidProviderToken")
            #expect(try await PushTokenStore(database: database).tokens(userID: setup.learner.id).count == 2)
        }
    }
}
