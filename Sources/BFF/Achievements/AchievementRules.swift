import BFFPlatform
import Crypto
import Foundation

/// The trophies; their names are the message catalogue's (`Phrase.Trophy`), their rules below.
typealias Trophy = Phrase.Trophy

/// What unlocks a trophy: a metric reaching a target. The database counts the metrics and knows the
/// moment each target was first reached (`bff_achievements`); which trophy needs which target is
/// written here and nowhere else.
struct AchievementRule: Sendable, Equatable {
    /// What `bff_achievements` counts; the raw values are its names.
    enum Metric: String, Sendable {
        /// The learner's explanations (their messages in chats).
        case turns
        /// Learner days in a row with a turn, a self-evaluation or a recall's evaluation.
        case streak
        /// Recalls evaluated.
        case recalls
        /// Misconception tags mastered (`AchievementRules.mastered`).
        case masteredTags = "mastered_tags"
        /// Subjects all of whose tags are mastered.
        case masteredSubjects = "mastered_subjects"
    }

    let trophy: Trophy
    let metric: Metric
    let target: Int
}

enum AchievementRules {
    /// A tag counts as mastered from this newest mastery on. Evaluations move mastery halfway towards
    /// the self-rating (score 5 → 1, 4 → 0.75): from a new tag's 0, two top ratings in a row (the
    /// chat's and its first recall's) reach 0.75, four 4s reach 0.70; a 3 or less never does.
    static let mastered = 0.7

    /// Every trophy's rule, in the trophies' order; the switch makes a new trophy name its rule.
    static let all: [AchievementRule] = Trophy.allCases.map { AchievementRules.rule($0) }

    static func rule(_ trophy: Trophy) -> AchievementRule {
        switch trophy {
        case .firstExplanation: AchievementRule(trophy: trophy, metric: .turns, target: 1)
        case .streak3: AchievementRule(trophy: trophy, metric: .streak, target: 3)
        case .streak7: AchievementRule(trophy: trophy, metric: .streak, target: 7)
        case .streak30: AchievementRule(trophy: trophy, metric: .streak, target: 30)
        case .firstRecall: AchievementRule(trophy: trophy, metric: .recalls, target: 1)
        case .recalls10: AchievementRule(trophy: trophy, metric: .recalls, target: 10)
        case .tagMastered: AchievementRule(trophy: trophy, metric: .masteredTags, target: 1)
        case .subjectMastered: AchievementRule(trophy: trophy, metric: .masteredSubjects, target: 1)
        }
    }

    /// What the stored answer was computed with (`achievement_progress.answered_rules`): a release
    /// that changes a rule or the threshold computes every learner's answer afresh.
    static let key: String = {
        let text = all.map { "\($0.trophy.rawValue):\($0.metric.rawValue):\($0.target)" }.joined(separator: ",") + "@\(mastered)"
        return SHA256.hash(data: Data(text.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }()
}
