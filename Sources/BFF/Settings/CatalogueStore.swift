import BFFPlatform
import Foundation
import Logging
import PostgresNIO

struct CatalogueSubject: Sendable, Equatable {
    let id: String
    let name: String
    var topics: [(id: String, name: String)]

    static func == (lhs: CatalogueSubject, rhs: CatalogueSubject) -> Bool {
        lhs.id == rhs.id && lhs.name == rhs.name && lhs.topics.map(\.id) == rhs.topics.map(\.id)
    }
}

/// The subject catalogue (`subjects`, `topics`, seeded by migration 0005, written by migrations
/// only): its reads for the settings, chat creation and the tutoring turn (whose one query reads
/// the same rows and decides with `resolve(subjectID:topicID:subjectExists:topicSubject:)`).
struct CatalogueStore: Sendable {
    let database: Database

    /// Every subject with its topics, in the catalogue's order, named in `language` (the web's own
    /// `name` where that language's is missing).
    func subjects(in language: Language) async throws -> [CatalogueSubject] {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT s.id, bff_catalogue_name(\(language.rawValue), s.name, s.name_ja, s.name_en),
                       t.id, bff_catalogue_name(\(language.rawValue), t.name, t.name_ja, t.name_en)
                FROM subjects s LEFT JOIN topics t ON t.subject_id = s.id
                ORDER BY s.position, s.id, t.position, t.id
                """)
            var subjects: [CatalogueSubject] = []
            for try await (id, name, topicID, topicName) in rows.decode((String, String, String?, String?).self) {
                if subjects.last?.id != id { subjects.append(CatalogueSubject(id: id, name: name, topics: [])) }
                if let topicID, let topicName { subjects[subjects.count - 1].topics.append((topicID, topicName)) }
            }
            return subjects
        }
    }

    /// Each subject's topic ids, for checking settings against, in the caller's transaction.
    static func topicsBySubject(_ connection: PostgresConnection, logger: Logger) async throws -> [String: Set<String>] {
        let rows = try await connection.query(
            "SELECT s.id, t.id FROM subjects s LEFT JOIN topics t ON t.subject_id = s.id", logger: logger)
        var catalogue: [String: Set<String>] = [:]
        for try await (subject, topic) in rows.decode((String, String?).self) {
            catalogue[subject, default: []].formUnion(topic.map { [$0] } ?? [])
        }
        return catalogue
    }

    /// The subject and topic must exist and agree; a topic alone implies its subject.
    static func resolve(
        _ connection: PostgresConnection, subjectID: String?, topicID: String?,
        logger: Logger
    ) async throws -> (String?, String?) {
        var exists = true
        if let subjectID {
            exists = false
            for try await _ in try await connection.query("SELECT 1 FROM subjects WHERE id = \(subjectID)", logger: logger) { exists = true }
        }
        var owner: String?
        if let topicID {
            for try await value in try await connection.query("SELECT subject_id FROM topics WHERE id = \(topicID)", logger: logger).decode(String.self) {
                owner = value
            }
        }
        return try resolve(subjectID: subjectID, topicID: topicID, subjectExists: exists, topicSubject: owner)
    }

    /// The same decision on what was read (the tutoring turn reads it in its one query): 422 for an
    /// unknown subject or topic, or a topic of another subject; a topic alone brings its subject.
    static func resolve(subjectID: String?, topicID: String?, subjectExists: Bool, topicSubject: String?) throws -> (String?, String?) {
        if subjectID != nil, !subjectExists { throw CatalogueError.unknownSubject(field: "subject_id") }
        guard let topicID else { return (subjectID, nil) }
        guard let owner = topicSubject else { throw CatalogueError.unknownTopic(field: "topic_id", problem: .noSuchTopic) }
        if let subjectID, subjectID != owner {
            throw CatalogueError.unknownTopic(field: "topic_id", problem: .topicOfAnotherSubject)
        }
        return (owner, topicID)
    }
}
