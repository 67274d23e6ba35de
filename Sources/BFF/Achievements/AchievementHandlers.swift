import BFFAPI
import BFFPlatform
import Crypto
import Foundation

/// `GET /api/v1/me/achievements` (M-010): read, name the trophies in the caller's language, tag.
extension APIService {
    /// A client keeps the answer and asks again with its tag: the streak changes at the day's end
    /// without any request, so nothing may be served without asking.
    static let achievementsCaching = "private, no-cache"

    /// Served by `AchievementsRoute` in the running server (it writes the JSON itself); this
    /// generated form of the same answer is the reference the route's output is tested against.
    func getAchievements(_ input: Operations.GetAchievements.Input) async throws -> Operations.GetAchievements.Output {
        let principal = try AppRequestContext.principal()
        let record = try await achievements.read(userID: principal.userID)
        let language = AppRequestContext.current?.answerLanguage(readAlong: record.language) ?? record.language ?? .default
        let body = record.schema(in: language)
        let tag = AchievementsRecord.entityTag(of: record.json(in: language))
        if let asked = input.headers.ifNoneMatch, Self.matches(asked, tag) {
            return .notModified(.init(headers: .init(eTag: tag, cacheControl: Self.achievementsCaching, vary: "Accept-Language")))
        }
        return .ok(
            .init(
                headers: .init(eTag: tag, cacheControl: Self.achievementsCaching, contentLanguage: language.rawValue, vary: "Accept-Language"),
                body: .json(body)))
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
