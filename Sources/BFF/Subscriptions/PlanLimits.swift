import BFFPlatform
import Foundation

/// What each plan allows (`BFF_PLAN_LIMITS`, JSON): tutoring turns per day, and the features a plan
/// below a given one lacks. By default free 20 turns a day, basic 200, pro unlimited, and every
/// feature open to all.
///
///     {"free": {"turns_per_day": 20}, "basic": {"turns_per_day": 200}, "pro": {"turns_per_day": null},
///      "features": {"instant_question": "basic"}}
///
/// A plan left out keeps its default; an unknown key or feature is refused at start-up.
public struct PlanLimits: Sendable, Equatable {
    /// Features a plan may be required for.
    public enum Feature: String, Sendable, CaseIterable {
        /// `POST /chat` with `mode: question` (M-007).
        case instantQuestion = "instant_question"
    }

    /// Turns a day per plan; nil: unlimited.
    public var turnsPerDay: [Plan: Int?]
    /// The lowest plan each gated feature needs.
    public var features: [Feature: Plan]

    public static let defaults = PlanLimits(turnsPerDay: [.free: 20, .basic: 200, .pro: nil], features: [:])

    public init(turnsPerDay: [Plan: Int?], features: [Feature: Plan]) {
        self.turnsPerDay = turnsPerDay
        self.features = features
    }

    func turns(for plan: Plan) -> Int? { turnsPerDay[plan] ?? nil }

    init(_ reader: EnvironmentReader) throws {
        self = .defaults
        guard let text = reader.optional("BFF_PLAN_LIMITS") else { return }
        let parsed: Parsed
        do {
            parsed = try JSONDecoder().decode(Parsed.self, from: Data(text.utf8))
        } catch let problem as Problem {
            throw ConfigurationError("BFF_PLAN_LIMITS", problem.text)
        } catch {
            throw ConfigurationError("BFF_PLAN_LIMITS", "must be a JSON object such as {\"free\": {\"turns_per_day\": 20}}")
        }
        for (plan, turns) in parsed.turns { turnsPerDay[plan] = .some(turns) }
        for (feature, plan) in parsed.features { features[feature] = plan }
    }

    private struct Problem: Error { let text: String }

    private struct Key: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    /// The variable's JSON, every key known or refused.
    private struct Parsed: Decodable {
        var turns: [(Plan, Int?)] = []
        var features: [(Feature, Plan)] = []

        init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: Key.self)
            for key in object.allKeys {
                if key.stringValue == "features" {
                    let gated = try object.nestedContainer(keyedBy: Key.self, forKey: key)
                    for name in gated.allKeys {
                        guard let feature = Feature(rawValue: name.stringValue) else {
                            throw Problem(text: "names an unknown feature \"\(name.stringValue)\" (known: \(Feature.allCases.map(\.rawValue).joined(separator: ", ")))")
                        }
                        guard let plan = Plan(rawValue: (try? gated.decode(String.self, forKey: name)) ?? "") else {
                            throw Problem(text: "feature \(name.stringValue) must name a plan: free, basic or pro")
                        }
                        features.append((feature, plan))
                    }
                    continue
                }
                guard let plan = Plan(rawValue: key.stringValue) else {
                    throw Problem(text: "has an unknown key \"\(key.stringValue)\" (free, basic, pro, features)")
                }
                let limits = try object.nestedContainer(keyedBy: Key.self, forKey: key)
                for name in limits.allKeys {
                    guard name.stringValue == "turns_per_day" else {
                        throw Problem(text: "\(plan.rawValue) has an unknown limit \"\(name.stringValue)\" (turns_per_day)")
                    }
                    if (try? limits.decodeNil(forKey: name)) == true {
                        self.turns.append((plan, nil))
                        continue
                    }
                    guard let turns = try? limits.decode(Int.self, forKey: name), turns >= 0 else {
                        throw Problem(text: "\(plan.rawValue).turns_per_day must be a whole number of 0 or more, or null for unlimited")
                    }
                    self.turns.append((plan, turns))
                }
            }
        }
    }
}
