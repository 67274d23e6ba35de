import Foundation
import NIOConcurrencyHelpers

/// Which user each IdP subject of the web's session cookies is, as this process last read it, so
/// that a cookie costs no database round trip once its learner has been seen.
///
/// Bounded by two generations: lookups hit the current one or promote from the previous one, and
/// when the current one is full it becomes the previous one and the one before is dropped. The
/// learners active in the last generation stay; the least recently seen go, at most `capacity`
/// entries in all.
final class WebSessionUsers: Sendable {
    struct Entry: Sendable {
        let userID: UUID
        /// When the database answered it, by this process's clock.
        let resolvedAt: Date
    }

    private struct Generations {
        var current: [String: Entry] = [:]
        var previous: [String: Entry] = [:]
    }

    private let generations = NIOLockedValueBox(Generations())
    /// Entries per generation.
    private let generationSize: Int

    init(capacity: Int = 20_000) {
        generationSize = max(1, capacity / 2)
    }

    /// The user of `subject` read after `notBefore` (any, when nil).
    func user(of subject: String, resolvedAfter notBefore: Date?) -> UUID? {
        generations.withLockedValue { (generations: inout Generations) -> UUID? in
            let entry: Entry
            if let current = generations.current[subject] {
                entry = current
            } else if let previous = generations.previous.removeValue(forKey: subject) {
                entry = previous
                Self.insert(entry, for: subject, into: &generations, size: generationSize)
            } else {
                return nil
            }
            if let notBefore, entry.resolvedAt <= notBefore { return nil }
            return entry.userID
        }
    }

    func remember(_ userID: UUID, of subject: String, resolvedAt: Date = Date()) {
        generations.withLockedValue { generations in
            Self.insert(Entry(userID: userID, resolvedAt: resolvedAt), for: subject, into: &generations, size: generationSize)
        }
    }

    private static func insert(_ entry: Entry, for subject: String, into generations: inout Generations, size: Int) {
        if generations.current[subject] == nil, generations.current.count >= size {
            generations.previous = generations.current
            generations.current = [:]
            generations.current.reserveCapacity(size)
        }
        generations.current[subject] = entry
    }
}
