import BFFAPI
import Foundation
import NIOCore
import Testing

@testable import BFF
@testable import BFFPlatform

/// The native route writes the answer itself; the generated schema, encoded as the generated server
/// encodes it, is the reference.
@Suite("Achievements route's JSON")
struct AchievementsRouteTests {
    static let record = AchievementsRecord(
        language: .en, currentStreak: 4, longestStreak: 9, todayDone: true, turns: 37, evaluatedChats: 5, recallsCompleted: 11,
        masteredTags: 2, masteredSubjects: 0,
        subjects: [.init(subjectID: "math", mastered: 1, total: 5), .init(subjectID: "physics", mastered: 1, total: 5)],
        unlocked: [
            "first_explanation": Date(timeIntervalSince1970: 1_764_000_000.123), "streak_3": Date(timeIntervalSince1970: 1_764_200_000),
            "first_recall": Date(timeIntervalSince1970: 1_764_300_000.5), "recalls_10": Date(timeIntervalSince1970: 1_764_400_000),
        ])

    private func object(_ data: Data) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: data) as? NSDictionary)
    }

    @Test("the route's bytes are the generated schema's JSON, in both languages, locked and unlocked trophies alike", arguments: Language.allCases)
    func sameAsTheSchema(language: Language) throws {
        for record in [
            Self.record,
            AchievementsRecord(
                language: nil, currentStreak: 0, longestStreak: 0, todayDone: false, turns: 0, evaluatedChats: 0, recallsCompleted: 0,
                masteredTags: 0, masteredSubjects: 0, subjects: [], unlocked: [:]),
        ] {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(try RFC3339Dates().encode(date))
            }
            let reference = try object(try encoder.encode(record.schema(in: language)))
            let native = try object(Data(buffer: record.json(in: language)))
            #expect(native == reference)
        }
    }

    @Test("the tag changes with every value and the language, and is stable")
    func entityTag() {
        let tag = AchievementsRecord.entityTag(of: Self.record.json(in: .ja))
        #expect(tag == AchievementsRecord.entityTag(of: Self.record.json(in: .ja)))
        #expect(tag != AchievementsRecord.entityTag(of: Self.record.json(in: .en)))
        #expect(tag.count == 26 && tag.hasPrefix("\"") && tag.hasSuffix("\""))
    }
}
