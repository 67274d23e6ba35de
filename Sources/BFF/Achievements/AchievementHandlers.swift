import BFFAPI
import BFFPlatform
import Crypto
import Foundation

/// `GET /api/v1/me/achievements` (M-010): read, name the trophies in the caller's language, tag.
extension APIService {
    /// A client keeps the answer and asks again with its tag: the streak changes at the day's end
    /// without any request, so nothing may be served without asking.
    static let achievementsCaching = "private, no-cache"

    func getAchievements(_ input: Operations.GetAchievements.Input) async throws -> Operations.GetAchievements.Output {
        let principal = try AppRequestContext.principal()
        let record = try await achievements.read(userID: principal.userID)
        // The setting came with the read: a learner this replica has not cached costs no second statement.
        let context = AppRequestContext.current
        let language = context?.knownLanguage ?? record.language ?? .default
        context?.pendingLanguage?.learned(language)
        let body = record.schema(in: language)
        let tag = Self.entityTag(of: body, language: language)
        if let asked = input.headers.ifNoneMatch, Self.matches(asked, tag) {
            return .notModified(.init(headers: .init(eTag: tag, cacheControl: Self.achievementsCaching, vary: "Accept-Language")))
        }
        return .ok(
            .init(
                headers: .init(eTag: tag, cacheControl: Self.achievementsCaching, contentLanguage: language.rawValue, vary: "Accept-Language"),
                body: .json(body)))
    }

    /// A strong tag of the answer: every value it carries and its language, hashed. Not the JSON
    /// bytes (the encoder writes them once, for the body); equal values are encoded to equal bytes.
    static func entityTag(of body: Components.Schemas.Achievements, language: Language) -> String {
        var text = "\(language.rawValue)|\(body.streak.current),\(body.streak.longest),\(body.streak.todayDone)"
        text += "|\(body.totals.turns),\(body.totals.evaluatedChats),\(body.totals.recallsCompleted)"
        for subject in body.subjects { text += "|\(subject.subjectId):\(subject.mastered)/\(subject.total)" }
        for trophy in body.trophies {
            let unlocked = trophy.unlockedAt.map { "\($0.timeIntervalSince1970)" } ?? "-"
            text += "|\(trophy.code)=\(trophy.name)@\(unlocked)#\(trophy.progress.current)/\(trophy.progress.target)"
        }
        return "\"" + SHA256.hash(data: Data(text.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
    }
}

extension AchievementsRecord {
    /// The answer in `language`: every trophy of the rules, in their order, with its progress.
    func schema(in language: Language) -> Components.Schemas.Achievements {
        Components.Schemas.Achievements(
            streak: .init(current: currentStreak, longest: longestStreak, todayDone: todayDone),
            totals: .init(turns: turns, evaluatedChats: evaluatedChats, recallsCompleted: recallsCompleted),
            subjects: subjects.map { .init(subjectId: $0.subjectID, mastered: $0.mastered, total: $0.total) },
            trophies: AchievementRules.all.map { rule in
                let unlockedAt = unlocked[rule.trophy.rawValue]
                let current = unlockedAt == nil ? min(value(of: rule.metric), rule.target) : rule.target
                return Components.Schemas.Trophy(
                    code: rule.trophy.rawValue, name: Phrase.trophyName(rule.trophy).text(in: language), unlockedAt: unlockedAt,
                    progress: .init(current: current, target: rule.target))
            })
    }
}
