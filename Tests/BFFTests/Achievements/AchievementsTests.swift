import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// `GET /api/v1/me/achievements` on a real database, the facts written with SQL at chosen instants:
/// the streak in the learner's days (time zones, DST), the totals, mastery per subject, each
/// trophy's rule and the moment it first held, the stored answer, ETag, scopes and languages, and the
/// achievements in the export and gone with the account.
@Suite("Achievements", .needsDatabase, .timeLimit(.minutes(4)))
struct AchievementsTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// A learner with settings in `zone` (none when nil), and their facts.
    func makeLearner(zone: String?, language: String = "ja") async throws -> (Learner, LearnerFacts) {
        let learner = try await Learner.make(database: database)
        let facts = LearnerFacts(database, learner)
        if let zone { try await facts.settings(zone: zone, language: language) }
        return (learner, facts)
    }

    func withApp(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let app = try await makeTestApp(database: database, environment: ["BFF_JOBS_CONCURRENCY": "0"])
        try await app.live { client in try await body(client) }
    }

    @Test("a new learner: no streak, zero totals, every subject's tags, every trophy locked with its progress, Japanese by default")
    func newLearner() async throws {
        let (learner, _) = try await makeLearner(zone: nil)
        try await withApp { client in
            let answer = try await client.achievements(of: learner)
            #expect(answer.streak.current == 0 && answer.streak.longest == 0 && answer.streak.todayDone == false)
            #expect(answer.totals == ["turns": 0, "evaluated_chats": 0, "recalls_completed": 0])
            #expect(answer.subjects["math"]?.mastered == 0 && answer.subjects["math"]?.total == 5)
            #expect(Set(answer.subjects.keys) == ["math", "physics", "chemistry", "biology", "english", "japanese"])
            #expect(answer.trophies.compactMap { $0["code"] as? String } == Trophy.allCases.map(\.rawValue))
            #expect(answer.trophies.allSatisfy { $0["unlocked_at"] == nil })
            #expect(answer.progress("streak_7") == [0, 7] && answer.progress("recalls_10") == [0, 10])
            #expect(answer.name("first_explanation") == "はじめての説明")
            #expect(answer.response.headers[.contentLanguage] == "ja")
            #expect(answer.response.headers[.cacheControl] == "private, no-cache")
            #expect(answer.response.headers[.vary]?.contains("Accept-Language") == true)
        }
    }

    @Test("the streak: today counts once done, a streak ending yesterday stays current until today ends, an older one is over; longest is kept")
    func currentAndLongest() async throws {
        let zone = "Asia/Tokyo"
        let (learner, facts) = try await makeLearner(zone: zone)
        let (lapsed, lapsedFacts) = try await makeLearner(zone: zone)
        let chat = try await facts.chat()
        // Four days in a row long ago, then a gap, then yesterday and the day before.
        for daysAgo in [12, 11, 10, 9, 2, 1] { try await facts.turn(in: chat, at: LearnerFacts.noon(daysAgo: daysAgo, in: zone)) }
        let lapsedChat = try await lapsedFacts.chat()
        for daysAgo in [4, 3] { try await lapsedFacts.turn(in: lapsedChat, at: LearnerFacts.noon(daysAgo: daysAgo, in: zone)) }
        try await withApp { client in
            let before = try await client.achievements(of: learner)
            #expect(before.streak.current == 2 && before.streak.longest == 4 && before.streak.todayDone == false)
            try await facts.turn(in: chat, at: LearnerFacts.now)
            let after = try await client.achievements(of: learner)
            #expect(after.streak.current == 3 && after.streak.longest == 4 && after.streak.todayDone == true)
            let over = try await client.achievements(of: lapsed)
            #expect(over.streak.current == 0 && over.streak.longest == 2 && over.streak.todayDone == false)
        }
    }

    @Test("evaluations and finished recalls make a day count too; a reply alone (an instant question) does not")
    func whatCounts() async throws {
        let zone = "UTC"
        let (learner, facts) = try await makeLearner(zone: zone)
        let chat = try await facts.chat()
        let other = try await facts.chat()
        try await facts.turn(in: chat, at: LearnerFacts.noon(daysAgo: 3, in: zone))
        try await facts.evaluation(of: chat, at: LearnerFacts.noon(daysAgo: 2, in: zone))
        try await facts.recall(of: chat, doneAt: LearnerFacts.noon(daysAgo: 1, in: zone))
        try await facts.reply(in: other, at: LearnerFacts.now)
        try await withApp { client in
            let answer = try await client.achievements(of: learner)
            #expect(answer.streak.current == 3 && answer.streak.longest == 3 && answer.streak.todayDone == false)
            #expect(answer.totals["turns"] == 1)
        }
    }

    @Test("days are the learner's: the same instants make a 3-day streak in Asia/Tokyo and 2 days in UTC; without settings, Tokyo")
    func tokyoAgainstUTC() async throws {
        // 23:00, 01:00 and 01:00 in Tokyo: three days there, two in UTC.
        let instants = ["2025-05-01T14:00:00Z", "2025-05-01T16:00:00Z", "2025-05-02T16:00:00Z"].map(LearnerFacts.at)
        var learners: [(String, Learner)] = []
        for zone in ["Asia/Tokyo", "UTC", nil] as [String?] {
            let (learner, facts) = try await makeLearner(zone: zone)
            let chat = try await facts.chat()
            for at in instants { try await facts.turn(in: chat, at: at) }
            learners.append((zone ?? "none", learner))
        }
        let all = learners
        try await withApp { client in
            var longest: [String: Int] = [:]
            for (zone, learner) in all { longest[zone] = try await client.achievements(of: learner).streak.longest }
            #expect(longest == ["Asia/Tokyo": 3, "UTC": 2, "none": 3])
        }
    }

    @Test("a learner in America/New_York across the March and November DST changes: days are local, the 3-day trophy at the third day's first fact")
    func daylightSavingTime() async throws {
        let zone = "America/New_York"
        // March 2025 (the 9th is 23 hours long): 12:00 EST on the 8th, 21:00 EDT on the 9th, 00:15 EDT
        // on the 10th. A fixed offset of -5 puts the last on the 9th; UTC puts the second on the 10th.
        let march = ["2025-03-08T17:00:00Z", "2025-03-10T01:00:00Z", "2025-03-10T04:15:00Z"].map(LearnerFacts.at)
        // November 2025 (the 2nd is 25 hours long): the 31st, then 23:30 local on the 1st, 2nd and 3rd.
        let november = ["2025-10-31T16:00:00Z", "2025-11-02T03:30:00Z", "2025-11-03T04:30:00Z", "2025-11-04T04:30:00Z"].map(LearnerFacts.at)
        let (marchLearner, marchFacts) = try await makeLearner(zone: zone)
        let marchChat = try await marchFacts.chat()
        for at in march { try await marchFacts.turn(in: marchChat, at: at) }
        let (novemberLearner, novemberFacts) = try await makeLearner(zone: zone)
        let novemberChat = try await novemberFacts.chat()
        for at in november { try await novemberFacts.turn(in: novemberChat, at: at) }
        try await withApp { client in
            let inMarch = try await client.achievements(of: marchLearner)
            #expect(inMarch.streak.longest == 3)
            #expect(inMarch.unlockedAt("streak_3") == march[2])
            #expect(inMarch.unlockedAt("first_explanation") == march[0])
            let inNovember = try await client.achievements(of: novemberLearner)
            #expect(inNovember.streak.longest == 4)
            // The third local day is November 2nd: its fact at 23:30 EST.
            #expect(inNovember.unlockedAt("streak_3") == november[2])
            #expect(inNovember.unlockedAt("streak_7") == nil && inNovember.progress("streak_7") == [0, 7])
        }
    }

    @Test("totals: the learner's explanations (not the replies), chats self-evaluated, recalls finished (not those waiting)")
    func totals() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let first = try await facts.chat()
        let second = try await facts.chat()
        for minutes in [30, 20, 10] { try await facts.turn(in: first, at: LearnerFacts.now.addingTimeInterval(-Double(minutes * 60))) }
        try await facts.turn(in: second, at: LearnerFacts.now)
        try await facts.evaluation(of: first, at: LearnerFacts.now)
        try await facts.recall(of: first, doneAt: LearnerFacts.now)
        try await facts.recall(of: second, doneAt: LearnerFacts.now)
        try await facts.pendingRecall(of: second)
        try await withApp { client in
            let totals = try await client.achievements(of: learner).totals
            #expect(totals == ["turns": 4, "evaluated_chats": 1, "recalls_completed": 2])
        }
    }

    @Test("mastery per subject: a tag's newest mastery counts, from 0.7; a new finding of the misconception takes it away; another learner's tags count for nobody else")
    func subjectMastery() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let (other, otherFacts) = try await makeLearner(zone: "UTC")
        let chat = try await facts.chat(subject: "math")
        let later = try await facts.chat(subject: "math")
        let base = LearnerFacts.at("2025-07-01T00:00:00Z")
        try await facts.tag("math.sign_error", in: chat, mastery: 0.75, at: base)
        try await facts.tag("math.order_of_operations", in: chat, mastery: 0.7, at: base)
        try await facts.tag("math.fraction_arithmetic", in: chat, mastery: 0.69, at: base)
        try await facts.tag("physics.unit_conversion", in: chat, mastery: 0.9, at: base)
        // Found again in a later chat, not yet mastered there.
        try await facts.tag("math.order_of_operations", in: later, mastery: 0, at: base.addingTimeInterval(86_400))
        let otherChat = try await otherFacts.chat(subject: "chemistry")
        try await otherFacts.tag("chemistry.mole_ratio", in: otherChat, mastery: 1, at: base)
        try await withApp { client in
            let answer = try await client.achievements(of: learner)
            #expect(answer.subjects["math"]?.mastered == 1 && answer.subjects["math"]?.total == 5)
            #expect(answer.subjects["physics"]?.mastered == 1)
            #expect(answer.subjects["chemistry"]?.mastered == 0)
            #expect(answer.progress("tag_mastered") == [1, 1])
            #expect(try await client.achievements(of: other).subjects["chemistry"]?.mastered == 1)
        }
    }

    @Test("each trophy unlocks at the moment its rule first held, once: a re-read and an earlier fact found later change nothing")
    func trophyMoments() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let chat = try await facts.chat(subject: "math")
        let start = LearnerFacts.at("2025-01-01T09:00:00Z")
        // 30 days in a row, two turns a day: each streak trophy at the first turn of its last day.
        for day in 0..<30 {
            let morning = start.addingTimeInterval(Double(day) * 86_400)
            try await facts.turn(in: chat, at: morning)
            try await facts.turn(in: chat, at: morning.addingTimeInterval(3_600))
        }
        // Eleven recalls an hour apart.
        let recalls = (1...11).map { start.addingTimeInterval(Double($0) * 3_600) }
        for doneAt in recalls { try await facts.recall(of: chat, doneAt: doneAt) }
        // Math's five tags mastered one by one, a day apart: the first tag's day, the last tag's day.
        let codes = ["math.sign_error", "math.order_of_operations", "math.distribution_error", "math.fraction_arithmetic", "math.discriminant_misuse"]
        let masteredAt = codes.indices.map { LearnerFacts.at("2025-03-01T10:00:00Z").addingTimeInterval(Double($0) * 86_400) }
        for (code, at) in zip(codes, masteredAt) { try await facts.tag(code, in: chat, mastery: 0.8, at: at) }
        try await withApp { client in
            let answer = try await client.achievements(of: learner)
            let expected: [String: Date] = [
                "first_explanation": start,
                "streak_3": start.addingTimeInterval(2 * 86_400),
                "streak_7": start.addingTimeInterval(6 * 86_400),
                "streak_30": start.addingTimeInterval(29 * 86_400),
                "first_recall": recalls[0],
                "recalls_10": recalls[9],
                "tag_mastered": masteredAt[0],
                "subject_mastered": masteredAt[4],
            ]
            for (code, at) in expected {
                #expect(answer.unlockedAt(code) == at, "\(code)")
                let progress = answer.progress(code)
                #expect(progress.count == 2 && progress.first == progress.last, "\(code)")
            }
            #expect(answer.streak.longest == 30)
            // An explanation from before, found only now (a late write), does not move the first one.
            try await facts.turn(in: chat, at: start.addingTimeInterval(-86_400))
            let again = try await client.achievements(of: learner)
            for (code, at) in expected { #expect(again.unlockedAt(code) == at, "\(code) after a re-read") }
            let rows = try await facts.count("SELECT count(*)::int FROM trophy_unlocks WHERE user_id = \(learner.id)")
            #expect(rows == Trophy.allCases.count)
        }
    }

    @Test("a trophy stays unlocked when its rule no longer holds; a locked one shows how far the learner is")
    func unlockedStays() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let chat = try await facts.chat(subject: "physics")
        let at = LearnerFacts.at("2025-06-01T08:00:00Z")
        try await facts.tag("physics.unit_conversion", in: chat, mastery: 0.9, at: at)
        for hour in 0..<4 { try await facts.recall(of: chat, doneAt: at.addingTimeInterval(Double(hour) * 3_600)) }
        try await withApp { client in
            let first = try await client.achievements(of: learner)
            #expect(first.unlockedAt("tag_mastered") == at)
            #expect(first.progress("recalls_10") == [4, 10] && first.unlockedAt("recalls_10") == nil)
            // The misconception shows up again: the tag is not mastered now, the trophy stays.
            try await facts.tag("physics.unit_conversion", in: chat, mastery: 0.1, at: LearnerFacts.now)
            let second = try await client.achievements(of: learner)
            #expect(second.subjects["physics"]?.mastered == 0)
            #expect(second.unlockedAt("tag_mastered") == at && second.progress("tag_mastered") == [1, 1])
        }
    }

    @Test("an unchanged learner is answered from the stored answer; a new fact computes afresh")
    func storedAnswer() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let hourAgo = Date().addingTimeInterval(-3_600)
        let chat = try await facts.chat(updatedAt: hourAgo)
        try await facts.run(
            """
            INSERT INTO messages (chat_id, user_id, role, content, created_at)
            VALUES (\(chat), \(learner.id), 'user', 'x', \(LearnerFacts.noon(daysAgo: 1, in: "UTC")))
            """)
        @Sendable func answeredAt() async throws -> Date? {
            try await database.withClient { client in
                for try await at in try await client.query("SELECT answered_at FROM achievement_progress WHERE user_id = \(learner.id)").decode(Date.self) {
                    return at
                }
                return nil
            }
        }
        try await withApp { client in
            let first = try await client.achievements(of: learner)
            let computed = try #require(try await answeredAt())
            let second = try await client.achievements(of: learner)
            #expect(try await answeredAt() == computed, "the second read computed again")
            #expect(second.response.headers[.eTag] == first.response.headers[.eTag])
            try await facts.turn(in: chat, at: LearnerFacts.now)
            let third = try await client.achievements(of: learner)
            let recomputed = try #require(try await answeredAt())
            #expect(recomputed > computed)
            #expect(third.streak.current == 2 && third.streak.todayDone == true)
        }
    }

    @Test("reads at once share the stored answers' statement: each learner gets their own, stored or computed, and a stale one is computed afresh")
    func batchedReads() async throws {
        var learners: [(id: UUID, turns: Int, facts: LearnerFacts)] = []
        for turns in 1...12 {
            let (learner, facts) = try await makeLearner(zone: "UTC")
            let chat = try await facts.chat()
            for minutes in 0..<turns { try await facts.turn(in: chat, at: LearnerFacts.now.addingTimeInterval(-Double(minutes * 60))) }
            learners.append((learner.id, turns, facts))
        }
        let all = learners
        let database = Database(client: PostgresClient(configuration: self.database.clientConfiguration(poolSize: 4)), timeout: .seconds(10))
        let store = AchievementStore(database: database, logger: TestEnvironment.quietLogger)
        @Sendable func readAll() async throws -> [UUID: Int] {
            try await withThrowingTaskGroup(of: (UUID, Int).self) { group in
                // Each learner three times at once: the batch holds the same learner more than once.
                for learner in all + all + all { group.addTask { (learner.id, try await store.read(userID: learner.id).turns) } }
                var turns: [UUID: Int] = [:]
                for try await (id, count) in group {
                    #expect(turns[id] == nil || turns[id] == count, "two reads of one learner answered differently")
                    turns[id] = count
                }
                return turns
            }
        }
        try await Commands.withDatabase(database.client) { _ in
            let expected = Dictionary(uniqueKeysWithValues: all.map { ($0.id, $0.turns) })
            let computed = try await readAll()
            #expect(computed == expected, "the first reads compute")
            let stored = try await readAll()
            #expect(stored == expected, "the second reads find the stored answers")
            try await all[0].facts.turn(in: try await all[0].facts.chat(), at: LearnerFacts.now)
            let afterChange = try await readAll()
            #expect(afterChange[all[0].id] == all[0].turns + 1, "a stored answer gone stale is computed afresh")
            #expect(afterChange.filter { $0.key != all[0].id } == expected.filter { $0.key != all[0].id })
        }
    }

    @Test("ETag: strong, the same for the same answer, 304 to If-None-Match (also in a list or weak), another after a change or in another language")
    func entityTag() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let chat = try await facts.chat()
        try await facts.turn(in: chat, at: LearnerFacts.noon(daysAgo: 1, in: "UTC"))
        try await withApp { client in
            let first = try await client.achievements(of: learner)
            let tag = try #require(first.response.headers[.eTag])
            #expect(tag.hasPrefix("\"") && tag.hasSuffix("\"") && !tag.hasPrefix("W/"))
            #expect(try await client.achievements(of: learner).response.headers[.eTag] == tag)
            for asked in [tag, "\"other\", \(tag)", "W/\(tag)", "*"] {
                let same = try await client.call(.get, "/api/v1/me/achievements", as: learner, headers: [.ifNoneMatch: asked])
                #expect(same.status == .notModified, "\(asked)")
                #expect(same.headers[.eTag] == tag && same.body.readableBytes == 0)
            }
            let stale = try await client.call(.get, "/api/v1/me/achievements", as: learner, headers: [.ifNoneMatch: "\"stale\""])
            #expect(stale.status == .ok)
            let english = try await client.achievements(of: learner, headers: [.acceptLanguage: "en"])
            #expect(english.response.headers[.eTag] != tag)
            let inEnglish = try await client.call(
                .get, "/api/v1/me/achievements", as: learner, headers: [.ifNoneMatch: tag, .acceptLanguage: "en"])
            #expect(inEnglish.status == .ok)
            try await facts.turn(in: chat, at: LearnerFacts.now)
            let changed = try await client.call(.get, "/api/v1/me/achievements", as: learner, headers: [.ifNoneMatch: tag])
            #expect(changed.status == .ok && changed.headers[.eTag] != tag)
        }
    }

    @Test("names: Japanese by default, English by Accept-Language, the learner's language setting without a usable header")
    func languages() async throws {
        let (learner, _) = try await makeLearner(zone: nil)
        let (english, _) = try await makeLearner(zone: "UTC", language: "en")
        try await withApp { client in
            let japanese = try await client.achievements(of: learner)
            #expect(japanese.name("streak_7") == "7日連続で学習" && japanese.response.headers[.contentLanguage] == "ja")
            let asked = try await client.achievements(of: learner, headers: [.acceptLanguage: "en-US,en;q=0.9,ja;q=0.5"])
            #expect(asked.name("streak_7") == "7-day streak" && asked.response.headers[.contentLanguage] == "en")
            #expect(asked.name("first_explanation") == "First explanation")
            let setting = try await client.achievements(of: english)
            #expect(setting.name("recalls_10") == "10 recalls" && setting.response.headers[.contentLanguage] == "en")
            let unusable = try await client.achievements(of: english, headers: [.acceptLanguage: "fr-FR"])
            #expect(unusable.response.headers[.contentLanguage] == "en")
            let header = try await client.achievements(of: english, headers: [.acceptLanguage: "ja"])
            #expect(header.name("recalls_10") == "復習10回" && header.response.headers[.contentLanguage] == "ja")
            // Every trophy has a name in each language.
            for trophy in Trophy.allCases {
                for language in Language.allCases { #expect(!Phrase.trophyName(trophy).text(in: language).isEmpty) }
            }
        }
    }

    @Test("scopes: profile:read and chat:rw both; a token lacking either is 403 insufficient_scope, none is 401")
    func scopes() async throws {
        let profileOnly = try await Learner.make(database: database, scopes: ["profile:read"])
        let chatOnly = try await Learner.make(database: database, scopes: ["chat:rw"])
        let both = try await Learner.make(database: database, scopes: ["profile:read", "chat:rw"])
        try await withApp { client in
            for learner in [profileOnly, chatOnly] {
                let refused = try await client.call(.get, "/api/v1/me/achievements", as: learner)
                #expect(refused.status == .forbidden && refused.errorCode == "insufficient_scope", "\(refused.text)")
            }
            #expect(try await client.call(.get, "/api/v1/me/achievements", as: both).status == .ok)
            let anonymous = try await client.execute(uri: "/api/v1/me/achievements", method: .get)
            #expect(anonymous.status == .unauthorized && anonymous.errorCode == "invalid_token")
        }
    }

    @Test("the export carries the achievements: their progress, the trophies with their moments, the streak pushes")
    func export() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let chat = try await facts.chat()
        let at = LearnerFacts.at("2025-04-01T10:00:00Z")
        try await facts.turn(in: chat, at: at)
        try await facts.run("INSERT INTO streak_pushes (user_id, day, streak, sent_at) VALUES (\(learner.id), '2025-04-02', 1, now())")
        try await withApp { client in
            _ = try await client.achievements(of: learner)
            let exported = try await client.call(.get, "/api/v1/me/export", as: learner)
            #expect(exported.status == .ok, "\(exported.text)")
            let achievements = try #require(exported.json["achievements"] as? [String: Any])
            let progress = try #require(achievements["progress"] as? [String: Any])
            #expect(progress["turns"] as? Int == 1 && progress["streak_longest"] as? Int == 1)
            let trophies = try #require(achievements["trophies"] as? [[String: Any]])
            #expect(trophies.map { $0["code"] as? String } == ["first_explanation"])
            #expect(RFC3339Dates.dateOrNil(trophies.first?["unlocked_at"] as? String).map { abs($0.timeIntervalSince(at)) < 0.001 } == true)
            let pushes = try #require(achievements["streak_pushes"] as? [[String: Any]])
            #expect(pushes.map { $0["day"] as? String } == ["2025-04-02"])
        }
    }

    @Test("deleting the account removes its achievements; another learner's stay")
    func deletion() async throws {
        let (learner, facts) = try await makeLearner(zone: "UTC")
        let (other, otherFacts) = try await makeLearner(zone: "UTC")
        for (each, eachFacts) in [(learner, facts), (other, otherFacts)] {
            let chat = try await eachFacts.chat()
            try await eachFacts.turn(in: chat, at: LearnerFacts.noon(daysAgo: 1, in: "UTC"))
            try await eachFacts.run("INSERT INTO streak_pushes (user_id, day, streak) VALUES (\(each.id), current_date, 1)")
        }
        @Sendable func rows(_ user: UUID) async throws -> [Int] {
            [
                try await facts.count("SELECT count(*)::int FROM achievement_progress WHERE user_id = \(user)"),
                try await facts.count("SELECT count(*)::int FROM trophy_unlocks WHERE user_id = \(user)"),
                try await facts.count("SELECT count(*)::int FROM streak_pushes WHERE user_id = \(user)"),
            ]
        }
        try await withApp { client in
            _ = try await client.achievements(of: learner)
            _ = try await client.achievements(of: other)
            #expect(try await rows(learner.id) == [1, 1, 1])
            let deleted = try await client.call(.delete, "/api/v1/me", as: learner)
            #expect(deleted.status == .ok, "\(deleted.text)")
            #expect(try await rows(learner.id) == [0, 0, 0])
            #expect(try await rows(other.id) == [1, 1, 1])
        }
    }
}
