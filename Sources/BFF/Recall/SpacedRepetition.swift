import BFFPlatform

/// When a chat comes back: SM-2's shape (an interval that a successful recall multiplies by an
/// ease factor between 1.3 and 3, a failed one resets), with the learner's self-evaluation and the
/// chat's tag mastery as the quality. SM-2 rather than FSRS: FSRS's parameters are fitted to a
/// learner's review history, which a new app does not have; SM-2's few constants are readable and
/// its behaviour is what the requirements ask for — weak recalls within hours, strong ones after
/// days, longer after every success. `base` is `BFF_RECALL_BASE_INTERVAL` (a day by default).
struct SpacedRepetition: Sendable {
    var base: Double = 86_400

    /// Below this quality a recall counts as failed and comes back within hours.
    static let passing = 0.45

    struct Plan: Sendable, Equatable {
        /// Successful recalls in a row before the planned one.
        let step: Int
        let intervalSeconds: Double
    }

    /// 0…1 from a score of 1…5 and the mean mastery of the chat's tags (nil without tags), half each.
    static func quality(score: Int, mastery: Double?) -> Double {
        let rating = Double(min(max(score, 1), 5) - 1) / 4
        guard let mastery else { return rating }
        return 0.5 * rating + 0.5 * min(max(mastery, 0), 1)
    }

    /// The next recall after an evaluation of `quality`; `previous` is the recall just evaluated
    /// (nil after the chat's own first evaluation).
    func next(quality: Double, previous: Plan?) -> Plan {
        guard quality >= Self.passing else { return Plan(step: 0, intervalSeconds: base / 4) }
        guard let previous else {
            // 1 to 3 base intervals: a confident first explanation waits longer.
            return Plan(step: 0, intervalSeconds: base * (1 + 2 * (quality - Self.passing) / (1 - Self.passing)))
        }
        let ease = 1.3 + 1.7 * quality
        // Never shorter than a first success, whatever the interval the last failure left.
        return Plan(step: previous.step + 1, intervalSeconds: max(previous.intervalSeconds * ease, base))
    }
}
