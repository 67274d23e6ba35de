import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// A learner's achievements as `bff_achievements` computes them: the streak in their days, the
/// totals, their mastery per subject, and the trophies unlocked with the moment each rule first held.
struct AchievementsRecord: Sendable, Equatable {
    struct SubjectMastery: Sendable, Equatable {
        let subjectID: String
        let mastered: Int
        let total: Int
    }

    /// `user_settings.language`; nil without settings or for a value this build does not know.
    let language: Language?
    let currentStreak: Int
    let longestStreak: Int
    let todayDone: Bool
    let turns: Int
    let evaluatedChats: Int
    let recallsCompleted: Int
    let masteredTags: Int
    let masteredSubjects: Int
    let subjects: [SubjectMastery]
    /// By trophy code.
    let unlocked: [String: Date]

    /// What `metric` stands at now: the streak's is the current one (what a locked streak trophy waits on).
    func value(of metric: AchievementRule.Metric) -> Int {
        switch metric {
        case .turns: turns
        case .streak: currentStreak
        case .recalls: recallsCompleted
        case .masteredTags: masteredTags
        case .masteredSubjects: masteredSubjects
        }
    }
}

/// `achievement_progress` and `trophy_unlocks` (migration 0034), their one owner: both are written
/// only by `bff_achievements`, which this store alone calls. The read is one prepared statement:
/// the stored answer while it holds (`bff_stored_achievements`, a row and a few index probes), else
/// a computation that folds in the learner's newest facts and stores its answer
/// (docs/architecture.md, "Achievements").
struct AchievementStore: Sendable {
    let database: Database
    let logger: Logger

    /// Facts older than this are folded into `achievement_progress` for good; newer ones are read
    /// again at each computation, so that one committed late is not missed. Far longer than any of
    /// the writers' transactions, which the statement deadline bounds.
    static let settleAfter: Double = 3_600
    /// How far before a stored answer a change still makes it stale: a transaction's rows carry its
    /// start, and it may commit after the answer's snapshot was taken.
    static let freshness: Double = 120

    /// The learner's achievements now. Every statement names the learner.
    func read(userID: UUID) async throws -> AchievementsRecord {
        let statement = ReadAchievements(userID: userID, defaultZone: LearnerSettings.defaults.timezone)
        return try await database.run { client in
            for try await record in try await client.execute(statement, logger: logger) { return record }
            throw DatabaseUnavailable(reason: "bff_achievements returned no row")
        }
    }
}

/// The stored answer while it holds, else `bff_achievements`: one statement, parsed and planned once
/// per connection. The second branch runs only when the first found nothing (`NOT EXISTS` over the
/// materialised CTE gates it, and the append stops at the first row anyway).
struct ReadAchievements: PostgresPreparedStatement {
    static let name = "bff_read_achievements"
    static let sql = """
        WITH stored AS (SELECT * FROM bff_stored_achievements($1::uuid, $3::float8, $8::text))
        SELECT * FROM stored
        UNION ALL
        SELECT * FROM bff_achievements($1::uuid, $2::text, $4::float8, $5::float8, $6::text[], $7::text[], $9::int4[], $8::text)
        WHERE NOT EXISTS (SELECT 1 FROM stored)
        """

    typealias Row = AchievementsRecord

    let userID: UUID
    let defaultZone: String

    func makeBindings() throws -> PostgresBindings {
        let rules = AchievementRules.all
        var bindings = PostgresBindings(capacity: 9)
        bindings.append(userID)
        bindings.append(defaultZone)
        bindings.append(AchievementStore.freshness)
        bindings.append(AchievementStore.settleAfter)
        bindings.append(AchievementRules.mastered)
        bindings.append(rules.map(\.trophy.rawValue))
        bindings.append(rules.map(\.metric.rawValue))
        bindings.append(AchievementRules.key)
        bindings.append(rules.map { Int32($0.target) })
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> AchievementsRecord {
        let (language, current, longest, todayDone, turns, evaluated, recalls, masteredTags, masteredSubjects, subjects, mastered, totals, codes, unlockedAt) =
            try row.decode((String?, Int32, Int32, Bool, Int64, Int64, Int64, Int32, Int32, [String], [Int32], [Int32], [String], [Date]).self)
        guard mastered.count == subjects.count, totals.count == subjects.count, unlockedAt.count == codes.count else {
            throw DatabaseUnavailable(reason: "bff_achievements returned arrays of different lengths")
        }
        return AchievementsRecord(
            language: language.flatMap(Language.init(rawValue:)), currentStreak: Int(current), longestStreak: Int(longest),
            todayDone: todayDone, turns: Int(turns), evaluatedChats: Int(evaluated), recallsCompleted: Int(recalls),
            masteredTags: Int(masteredTags), masteredSubjects: Int(masteredSubjects),
            subjects: subjects.indices.map { .init(subjectID: subjects[$0], mastered: Int(mastered[$0]), total: Int(totals[$0])) },
            unlocked: Dictionary(zip(codes, unlockedAt), uniquingKeysWith: { first, _ in first }))
    }
}
