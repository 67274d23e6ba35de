import Foundation

/// What Notification Hubs' REST reference documents of installations and tags, as the local hub
/// checks it ("Create or overwrite an installation", "Routing and tag expressions"): an
/// installation's members and their types, the platforms, a tag's characters and length, the tags
/// an installation may hold, and the tag expressions of a send.
enum NotificationHubsRules {
    /// The installation platforms the service names (it reads them case-insensitively).
    static let platforms: Set = ["apns", "wns", "mpns", "adm", "baidu", "gcm", "fcmv1", "browser", "xiaomi"]

    /// The members of an installation's JSON; another is refused (the service would ignore it, and a
    /// client that sends one means something the hub will not do).
    static let installationMembers: Set = [
        "installationId", "userId", "userID", "lastActiveOn", "expirationTime", "lastUpdate", "platform", "pushChannel",
        "expiredPushChannel", "tags", "templates", "secondaryTiles", "pushVariables",
    ]

    /// An installation's tags, at most.
    static let tagsPerInstallation = 60
    /// Tags in an expression of ORs alone, and in one with any AND.
    static let tagsPerOrExpression = 20
    static let tagsPerExpression = 6

    /// Up to 120 characters of A-Z a-z 0-9 and _ @ # . : -
    static func isTag(_ text: String) -> Bool {
        (1...120).contains(text.utf8.count)
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || "_@#.:-".utf8.contains($0) }
    }

    /// Why the hub would refuse `object` as the installation at `/installations/{id}`; nil when it would not.
    static func installationViolation(_ object: [String: Any], id: String) -> String? {
        if let unknown = object.keys.sorted().first(where: { !installationMembers.contains($0) }) { return "unknown member \(unknown)" }
        guard let installationID = object["installationId"] as? String else { return "installationId missing or not a string" }
        guard installationID == id else { return "installationId is not the id in the URL" }
        guard let platform = (object["platform"] as? String)?.lowercased(), platforms.contains(platform) else {
            return "platform missing or not one of \(platforms.sorted().joined(separator: ", "))"
        }
        guard let channel = object["pushChannel"] as? String, !channel.isEmpty else { return "pushChannel missing, empty or not a string" }
        if platform == "apns" {
            let bytes = channel.utf8
            guard bytes.count % 2 == 0, bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) || ($0 >= 0x61 && $0 <= 0x66) })
            else { return "an apns pushChannel is an APNs device token in hexadecimal" }
        }
        if let tags = object["tags"] {
            guard let tags = tags as? [Any], tags.allSatisfy({ $0 is String }) else { return "tags is not an array of strings" }
            guard tags.count <= tagsPerInstallation else { return "more than \(tagsPerInstallation) tags" }
            guard tags.allSatisfy({ isTag($0 as? String ?? "") }) else { return "a tag is not 1-120 characters of A-Z a-z 0-9 _ @ # . : -" }
        }
        if let user = object["userId"] ?? object["userID"], !(user is String) { return "userId is not a string" }
        if let templates = object["templates"], !(templates is [String: Any]) { return "templates is not an object" }
        return nil
    }

    /// A tag expression's OR-clauses of AND-ed tags; nil when the hub would refuse it. Stricter than
    /// the service: no `!` and no parentheses, which this server never sends.
    static func clauses(_ expression: String) -> [[String]]? {
        let clauses = expression.components(separatedBy: "||").map { clause in
            clause.components(separatedBy: "&&").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let tags = clauses.flatMap { $0 }
        guard tags.allSatisfy(isTag) else { return nil }
        let anded = clauses.contains { $0.count > 1 }
        guard tags.count <= (anded ? tagsPerExpression : tagsPerOrExpression) else { return nil }
        return clauses
    }

    /// Whether an installation of `tags` matches the expression's `clauses`.
    static func matches(_ clauses: [[String]], tags: [String]) -> Bool {
        let held = Set(tags)
        return clauses.contains { $0.allSatisfy(held.contains) }
    }

    /// The installation platform a send format reaches.
    static func platform(ofFormat format: String) -> String? {
        switch format {
        case "apple": "apns"
        case "fcmv1": "fcmv1"
        default: nil
        }
    }
}
