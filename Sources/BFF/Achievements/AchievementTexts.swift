import BFFPlatform

/// Every text the achievements show a learner, in each language the server speaks: one exhaustive
/// switch, so a new trophy, text or language does not build until each is written. Written for
/// high-school students; nothing here quotes what a learner wrote.
enum AchievementText: Sendable, Equatable {
    /// A trophy's name in the list.
    case trophyName(Trophy)
    /// The streak push's title.
    case streakPushTitle
    /// The streak push's body: `days` is the streak that breaks tonight unless today counts.
    case streakPushBody(days: Int)

    func text(in language: Language) -> String {
        switch (self, language) {
        case (.trophyName(.firstExplanation), .ja): "はじめての説明"
        case (.trophyName(.firstExplanation), .en): "First explanation"
        case (.trophyName(.streak3), .ja): "3日連続で学習"
        case (.trophyName(.streak3), .en): "3-day streak"
        case (.trophyName(.streak7), .ja): "7日連続で学習"
        case (.trophyName(.streak7), .en): "7-day streak"
        case (.trophyName(.streak30), .ja): "30日連続で学習"
        case (.trophyName(.streak30), .en): "30-day streak"
        case (.trophyName(.firstRecall), .ja): "はじめての復習"
        case (.trophyName(.firstRecall), .en): "First recall"
        case (.trophyName(.recalls10), .ja): "復習10回"
        case (.trophyName(.recalls10), .en): "10 recalls"
        case (.trophyName(.tagMastered), .ja): "つまずきを克服"
        case (.trophyName(.tagMastered), .en): "A misconception overcome"
        case (.trophyName(.subjectMastered), .ja): "教科のつまずきを全部克服"
        case (.trophyName(.subjectMastered), .en): "A whole subject mastered"
        case (.streakPushTitle, .ja): "連続記録が途切れそう！"
        case (.streakPushTitle, .en): "Keep your streak going"
        case (.streakPushBody(let days), .ja): "今日はまだ学習していません。1つ説明して、\(days + 1)日連続にしよう！"
        case (.streakPushBody(let days), .en): "You haven't studied today yet. Explain one thing to make it \(days + 1) days in a row."
        }
    }
}
