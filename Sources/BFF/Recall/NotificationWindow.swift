import BFFPlatform
import Foundation

/// The learner's notification window (settings, docs/requirements.md §7): pushes only between `start` and
/// `end` in their time zone; an `end` before `start` spans midnight.
struct NotificationWindow: Sendable, Equatable {
    /// Minutes after local midnight.
    let start: Int
    let end: Int
    let zone: TimeZone

    static let `default` = NotificationWindow(start: 8 * 60, end: 18 * 60, zone: TimeZone(identifier: "Asia/Tokyo")!)

    /// From the settings' `HH:MM` texts and zone name; the default's parts for anything unreadable
    /// (the settings were validated when stored).
    init(start: String, end: String, zone: String) {
        func minutes(_ text: String) -> Int? {
            let parts = text.split(separator: ":")
            guard parts.count == 2, let hours = Int(parts[0]), let minutes = Int(parts[1]) else { return nil }
            return hours * 60 + minutes
        }
        self.start = minutes(start) ?? Self.default.start
        self.end = minutes(end) ?? Self.default.end
        self.zone = TimeZone(identifier: zone) ?? Self.default.zone
    }

    init(start: Int, end: Int, zone: TimeZone) {
        self.start = start
        self.end = end
        self.zone = zone
    }

    private var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar
    }

    func contains(_ date: Date) -> Bool {
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        return start < end ? (start..<end).contains(minute) : (minute >= start || minute < end)
    }

    /// `date` when it lies inside the window, else the window's next opening after it.
    func place(_ date: Date) -> Date {
        guard !contains(date) else { return date }
        let calendar = calendar
        var day = calendar.startOfDay(for: date)
        // Today's opening, or the next day's; a day without the opening time (a DST gap) moves on.
        for _ in 0..<3 {
            if let opening = calendar.date(bySettingHour: start / 60, minute: start % 60, second: 0, of: day), opening > date {
                return opening
            }
            guard let next = calendar.date(byAdding: .day, value: 1, to: day) else { break }
            day = next
        }
        return date
    }
}
