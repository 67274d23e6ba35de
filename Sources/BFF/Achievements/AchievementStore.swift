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
/// only by `bff_achievements`, which this store alone calls. A read is the stored answer while it
/// holds (`bff_stored_achievements`, a row and a few index probes), else a computation that folds in
/// the learner's newest facts and stores its answer (docs/architecture.md, "Achievements").
///
/// The stored answers of the reads running at once are read by one statement
/// (`StoredAchievementsBatch` through a `StatementBatcher`), as the chat list's first pages are: a
/// statement costs the server 130–160 µs in postgres-nio and task switches however little it reads,
/// and one per read kept the answer's p99 at 32 connections at 1.1–2.2× the list's from run to run,
/// its server CPU 300–390 µs a request against the list's 216–282 (`scripts/bench achievements`).
struct AchievementStore: Sendable {
    let database: Database
    let logger: Logger
    /// Shared by the store's copies: the process makes one store, so concurrent reads meet.
    private let stored: StatementBatcher<UUID, AchievementsRecord?>

    /// Facts older than this are folded into `achievement_progress` for good; newer ones are read
    /// again at each computation, so that one committed late is not missed. Far longer than any of
    /// the writers' transactions, which the statement deadline bounds.
    static let settleAfter: Double = 3_600
    /// How far before a stored answer a change still makes it stale: a transaction's rows carry its
    /// start, and it may commit after the answer's snapshot was taken.
    static let freshness: Double = 120
    /// The most reads one stored-answer statement takes (the list's batches are at most 32).
    static let batchSize = 64

    init(database: Database, logger: Logger) {
        self.database = database
        self.logger = logger
        stored = StatementBatcher(most: Self.batchSize) { userIDs in
            try await Self.storedAnswers(of: userIDs, database: database, logger: logger)
        }
    }

    /// The learner's achievements now. Every statement names the learner.
    func read(userID: UUID) async throws -> AchievementsRecord {
        if let record = try await stored.submit(userID) { return record }
        let statement = ComputeAchievements(userID: userID, defaultZone: LearnerSettings.defaults.timezone)
        return try await database.run { client in
            for try await record in try await client.execute(statement, logger: logger) { return record }
            throw DatabaseUnavailable(reason: "bff_achievements returned no row")
        }
    }

    /// The stored answers of `userIDs`, in their order; nil where none holds. Each row names its
    /// position and learner, both checked: an answer goes only to the read that asked for it.
    private static func storedAnswers(of userIDs: [UUID], database: Database, logger: Logger) async throws -> [AchievementsRecord?] {
        try await database.run { client in
            var answers = [AchievementsRecord??](repeating: nil, count: userIDs.count)
            for try await (position, userID, record) in try await client.execute(StoredAchievementsBatch(userIDs: userIDs), logger: logger) {
                guard answers.indices.contains(position), userIDs[position] == userID, answers[position] == nil else {
                    throw DatabaseUnavailable(reason: "a stored achievements row came back for another position or learner")
                }
                answers[position] = .some(record)
            }
            return try answers.map { answer in
                guard let answer else { throw DatabaseUnavailable(reason: "a learner's stored achievements row is missing") }
                return answer
            }
        }
    }
}

extension AchievementsRecord {
    /// The columns `bff_achievements` and `bff_stored_achievements` return, in their order; all NULL
    /// where no stored answer holds (the batch's outer join).
    typealias Columns = (
        String?, Int32?, Int32?, Bool?, Int64?, Int64?, Int64?, Int32?, Int32?, [String]?, [Int32]?, [Int32]?, [String]?, [Date]?
    )

    /// The record in `columns`; nil when they are all NULL.
    init?(columns: Columns) throws {
        let (language, current, longest, todayDone, turns, evaluated, recalls, masteredTags, masteredSubjects, subjects, mastered, totals, codes, unlockedAt) =
            columns
        guard let current else { return nil }
        guard let longest, let todayDone, let turns, let evaluated, let recalls, let masteredTags, let masteredSubjects,
            let subjects, let mastered, let totals, let codes, let unlockedAt
        else { throw DatabaseUnavailable(reason: "achievements came back with NULL columns") }
        guard mastered.count == subjects.count, totals.count == subjects.count, unlockedAt.count == codes.count else {
            throw DatabaseUnavailable(reason: "achievements came back with arrays of different lengths")
        }
        self.init(
            language: language.flatMap(Language.init(rawValue:)), currentStreak: Int(current), longestStreak: Int(longest),
            todayDone: todayDone, turns: Int(turns), evaluatedChats: Int(evaluated), recallsCompleted: Int(recalls),
            masteredTags: Int(masteredTags), masteredSubjects: Int(masteredSubjects),
            subjects: subjects.indices.map { .init(subjectID: subjects[$0], mastered: Int(mastered[$0]), total: Int(totals[$0])) },
            unlocked: Dictionary(zip(codes, unlockedAt), uniquingKeysWith: { first, _ in first }))
    }
}

/// The stored answers of several learners: one row per learner, its position in the arguments
/// (from 0), its id, and its answer's columns, NULL where none holds.
struct StoredAchievementsBatch: PostgresPreparedStatement {
    static let name = "bff_stored_achievements_batch"
    static let sql = """
        SELECT b.position - 1, b.user_id, s.*
        FROM unnest($1::uuid[]) WITH ORDINALITY AS b(user_id, position)
        LEFT JOIN LATERAL bff_stored_achievements(b.user_id, $2::float8, $3::text) s ON true
        """

    typealias Row = (Int, UUID, AchievementsRecord?)

    let userIDs: [UUID]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(userIDs)
        bindings.append(AchievementStore.freshness)
        bindings.append(AchievementRules.key)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        let (position, userID, language, current, longest, todayDone, turns, evaluated, recalls, masteredTags, masteredSubjects, subjects, mastered, totals, codes, unlockedAt) =
            try row.decode(
                (Int, UUID, String?, Int32?, Int32?, Bool?, Int64?, Int64?, Int64?, Int32?, Int32?, [String]?, [Int32]?, [Int32]?, [String]?, [Date]?).self)
        let record = try AchievementsRecord(
            columns: (language, current, longest, todayDone, turns, evaluated, recalls, masteredTags, masteredSubjects, subjects, mastered, totals, codes, unlockedAt))
        return (position, userID, record)
    }
}

/// `bff_achievements`: the learner's facts since the fold, the mastery and the trophies, and the
/// answer stored for the reads after it.
struct ComputeAchievements: PostgresPreparedStatement {
    static let name = "bff_compute_achievements"
    static let sql = """
        SELECT * FROM bff_achievements($1::uuid, $2::text, $3::float8, $4::float8, $5::text[], $6::text[], $7::int4[], $8::text)
        """

    typealias Row = AchievementsRecord

    let userID: UUID
    let defaultZone: String

    func makeBindings() throws -> PostgresBindings {
        let rules = AchievementRules.all
        var bindings = PostgresBindings(capacity: 8)
        bindings.append(userID)
        bindings.append(defaultZone)
        bindings.append(AchievementStore.settleAfter)
        bindings.append(AchievementRules.mastered)
        bindings.append(rules.map(\.trophy.rawValue))
        bindings.append(rules.map(\.metric.rawValue))
        bindings.append(rules.map { Int32($0.target) })
        bindings.append(AchievementRules.key)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> AchievementsRecord {
        guard let record = try AchievementsRecord(columns: try row.decode(AchievementsRecord.Columns.self)) else {
            throw DatabaseUnavailable(reason: "bff_achievements returned NULL achievements")
        }
        return record
    }
}
