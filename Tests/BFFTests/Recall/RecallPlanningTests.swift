import Foundation
import Testing

@testable import BFF
@testable import BFFPlatform

/// Spaced repetition and the notification window, without a database.
@Suite("Recall planning", .timeLimit(.minutes(3)))
struct RecallPlanningTests {
    static func date(_ text: String) -> Date {
        ISO8601DateFormatter().date(from: text)!
    }

    @Test("a weak recall comes back within hours, a strong one after days, and every success lengthens the next interval")
    func intervals() {
        let repetition = SpacedRepetition(base: 86_400)
        let weak = repetition.next(quality: SpacedRepetition.quality(score: 1, mastery: 0.1), previous: nil)
        #expect(weak.intervalSeconds <= 6 * 3_600)
        #expect(weak.step == 0)
        let strong = repetition.next(quality: SpacedRepetition.quality(score: 5, mastery: 0.9), previous: nil)
        #expect(strong.intervalSeconds >= 2 * 86_400)
        // High self-evaluation, low mastery: not yet a strong recall.
        let mixed = repetition.next(quality: SpacedRepetition.quality(score: 5, mastery: 0), previous: nil)
        #expect(mixed.intervalSeconds < strong.intervalSeconds)
        var plan = strong
        for step in 1...4 {
            let next = repetition.next(quality: SpacedRepetition.quality(score: 4, mastery: 0.7), previous: plan)
            #expect(next.intervalSeconds > plan.intervalSeconds, "step \(step)")
            #expect(next.step == step)
            plan = next
        }
        let failed = repetition.next(quality: SpacedRepetition.quality(score: 2, mastery: 0.2), previous: plan)
        #expect(failed.step == 0)
        #expect(failed.intervalSeconds <= 6 * 3_600)
    }

    @Test("the default window is 08:00-18:00 Asia/Tokyo: a time inside stays, one outside moves to the next opening")
    func defaultWindow() {
        let window = NotificationWindow.default
        // 10:00 JST
        #expect(window.place(Self.date("2026-03-10T01:00:00Z")) == Self.date("2026-03-10T01:00:00Z"))
        // 19:30 JST → 08:00 JST the next day
        #expect(window.place(Self.date("2026-03-10T10:30:00Z")) == Self.date("2026-03-10T23:00:00Z"))
        // 06:00 JST → 08:00 JST the same day
        #expect(window.place(Self.date("2026-03-09T21:00:00Z")) == Self.date("2026-03-09T23:00:00Z"))
        // 18:00 JST is outside (the end is exclusive)
        #expect(window.place(Self.date("2026-03-10T09:00:00Z")) == Self.date("2026-03-10T23:00:00Z"))
    }

    @Test("a window in another zone, one across midnight, and a DST change")
    func otherWindows() {
        let newYork = NotificationWindow(start: "09:00", end: "17:00", zone: "America/New_York")
        // 20:00 EST on 2026-03-07 → 09:00 EDT on 2026-03-08 (clocks went forward at 02:00)
        #expect(newYork.place(Self.date("2026-03-08T01:00:00Z")) == Self.date("2026-03-08T13:00:00Z"))
        let night = NotificationWindow(start: "21:00", end: "07:00", zone: "Europe/Paris")
        // 23:30 CET is inside; so is 06:59
        #expect(night.place(Self.date("2026-01-15T22:30:00Z")) == Self.date("2026-01-15T22:30:00Z"))
        #expect(night.contains(Self.date("2026-01-16T05:59:00Z")))
        // 12:00 CET → 21:00 CET the same day
        #expect(night.place(Self.date("2026-01-15T11:00:00Z")) == Self.date("2026-01-15T20:00:00Z"))
        // 07:00 CET → 21:00 CET
        #expect(night.place(Self.date("2026-01-16T06:00:00Z")) == Self.date("2026-01-16T20:00:00Z"))
        for hour in 0..<48 {
            let date = Self.date("2026-01-15T00:00:00Z").addingTimeInterval(Double(hour) * 1_800)
            #expect(night.contains(night.place(date)), "\(date)")
            #expect(newYork.contains(newYork.place(date)), "\(date)")
        }
    }
}
