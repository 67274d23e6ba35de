import BFFAPI
import BFFPlatform
import Foundation

/// Settings (M-006) and the subject catalogue for the settings screen.
extension APIService {
    func getSettings(_ input: Operations.GetSettings.Input) async throws -> Operations.GetSettings.Output {
        let principal = try AppRequestContext.principal()
        return .ok(.init(body: .json(try await settings.settings(userID: principal.userID).schema)))
    }

    func replaceSettings(_ input: Operations.ReplaceSettings.Input) async throws -> Operations.ReplaceSettings.Output {
        let principal = try AppRequestContext.principal()
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let replacement = try LearnerSettings(validating: body)
        let stored = try await settings.replace(userID: principal.userID, with: replacement)
        if let language = stored.language { learnerLanguages.remember(language, of: principal.userID) }
        return .ok(.init(body: .json(stored.schema)))
    }

    func listSubjects(_ input: Operations.ListSubjects.Input) async throws -> Operations.ListSubjects.Output {
        _ = try AppRequestContext.principal()
        let subjects = try await catalogue.subjects(in: await AppRequestContext.answerLanguage())
        return .ok(
            .init(
                body: .json(
                    .init(
                        items: subjects.map { subject in
                            .init(id: subject.id, name: subject.name, topics: subject.topics.map { .init(id: $0.id, name: $0.name) })
                        }))))
    }
}

extension CatalogueError: DomainError {
    var apiError: APIError {
        switch self {
        case .unknownSubject(let field): APIError(.unknownSubject, .invalid(field: field, .noSuchSubject))
        case .unknownTopic(let field, let problem): APIError(.unknownTopic, .invalid(field: field, problem))
        }
    }
}

extension LearnerSettings {
    /// Checks what the schema cannot express; each failure names its field.
    init(validating body: Components.Schemas.ReplaceSettingsRequest) throws {
        func time(_ value: String, _ field: String) throws -> String {
            // Digits only: Int("+1") parses, and PostgreSQL reads "1:+05" as 01:00 at offset +05.
            let bytes = Array(value.utf8)
            func digit(_ index: Int) -> Int? {
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) ? Int(bytes[index] - UInt8(ascii: "0")) : nil
            }
            guard bytes.count == 5, bytes[2] == UInt8(ascii: ":"),
                let h1 = digit(0), let h2 = digit(1), let m1 = digit(3), let m2 = digit(4),
                h1 * 10 + h2 <= 23, m1 * 10 + m2 <= 59
            else { throw APIError.validation(field, .timeOfDayShape) }
            return value
        }
        func difficulty(_ value: Int, _ field: String) throws -> Int {
            guard (1...5).contains(value) else { throw APIError.validation(field, .between(1, 5)) }
            return value
        }
        let window = body.notificationWindow
        guard (1...64).contains(window.timezone.count), Self.isZoneName(window.timezone) else {
            throw APIError.validation("notification_window.timezone", .timeZoneShape)
        }
        guard body.subjects.count <= 50 else { throw APIError.validation("subjects", .atMostEntries(50)) }
        var seen: Set<String> = []
        var subjects: [SubjectPreference] = []
        for (index, preference) in body.subjects.enumerated() {
            guard seen.insert(preference.subjectId).inserted else {
                throw APIError.validation("subjects[\(index)].subject_id", .appearsTwice)
            }
            guard preference.topicIds.count <= 100, Set(preference.topicIds).count == preference.topicIds.count else {
                throw APIError.validation("subjects[\(index)].topic_ids", .atMostDistinctTopics(100))
            }
            subjects.append(
                .init(
                    subjectID: preference.subjectId, topicIDs: preference.topicIds,
                    difficulty: try difficulty(preference.difficulty, "subjects[\(index)].difficulty")))
        }
        let notifyStart = try time(window.start, "notification_window.start")
        let notifyEnd = try time(window.end, "notification_window.end")
        // Read as an empty window it would silence the learner; as a whole day, wake them at night.
        guard notifyEnd != notifyStart else {
            throw APIError.validation("notification_window.end", .windowEndEqualsStart)
        }
        self.init(
            subjects: subjects, difficulty: try difficulty(body.difficulty, "difficulty"),
            notifyStart: notifyStart, notifyEnd: notifyEnd, timezone: window.timezone, theme: body.theme.rawValue,
            notificationsEnabled: body.notificationsEnabled ?? true,
            language: try Self.language(body.language))
    }

    /// Left out or null: keep the stored one.
    private static func language(_ given: Components.Schemas.ReplaceSettingsRequest.LanguagePayload?) throws -> Language? {
        switch given {
        case .ja?: .ja
        case .en?: .en
        case nil: nil
        default: throw APIError.validation("language", .invalidValue)
        }
    }

    var schema: Components.Schemas.Settings {
        .init(
            subjects: subjects.map { .init(subjectId: $0.subjectID, topicIds: $0.topicIDs, difficulty: $0.difficulty) },
            difficulty: difficulty,
            notificationWindow: .init(start: notifyStart, end: notifyEnd, timezone: timezone),
            theme: Components.Schemas.Settings.ThemePayload(rawValue: theme) ?? .system,
            notificationsEnabled: notificationsEnabled,
            language: Components.Schemas.Language(rawValue: (language ?? .default).rawValue) ?? .ja)
    }

    /// A zone of the system's zone database: a file under its directory. `TimeZone(identifier:)`
    /// alone also takes offsets such as `GMT+05:30`, which are no zone names and which PostgreSQL's
    /// POSIX reading turns around (its `GMT+5` is five hours behind UTC).
    static func isZoneName(_ name: String) -> Bool {
        // The contract's pattern, ^[A-Za-z][A-Za-z0-9_+/-]*$, which also keeps ".." out of the path.
        func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
        let bytes = name.utf8
        guard let first = bytes.first, isLetter(first), bytes.allSatisfy({ isLetter($0) || (0x30...0x39).contains($0) || "_+/-".utf8.contains($0) }),
            TimeZone(identifier: name) != nil
        else { return false }
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: zoneDirectory + "/" + name, isDirectory: &isDirectory) && !isDirectory.boolValue
    }

    /// Read once: `ProcessInfo.environment` builds a dictionary of the whole environment per call.
    private static let zoneDirectory = ProcessInfo.processInfo.environment["TZDIR"] ?? "/usr/share/zoneinfo"
}
