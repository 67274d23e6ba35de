import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Settings and catalogue", .needsDatabase, .timeLimit(.minutes(3)))
struct SettingsTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    static let valid =
        #"{"subjects":[{"subject_id":"math","topic_ids":["math.quadratics"],"difficulty":4}],"difficulty":2,"notification_window":{"start":"07:30","end":"21:00","timezone":"Europe/Paris"},"theme":"dark"}"#

    @Test("defaults when nothing is stored; PUT replaces everything; the catalogue lists the seeded subjects")
    func defaultsAndReplace() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let defaults = try await client.call(.get, "/api/v1/settings", as: learner)
            #expect(defaults.status == .ok)
            let window = defaults.json["notification_window"] as? [String: Any]
            #expect(window?["start"] as? String == "08:00" && window?["end"] as? String == "18:00" && window?["timezone"] as? String == "Asia/Tokyo")
            #expect(defaults.json["theme"] as? String == "system" && defaults.json["difficulty"] as? Int == 3)
            let replaced = try await client.call(.put, "/api/v1/settings", as: learner, json: Self.valid)
            #expect(replaced.status == .ok)
            let stored = try await client.call(.get, "/api/v1/settings", as: learner)
            #expect(stored.json["theme"] as? String == "dark" && stored.json["difficulty"] as? Int == 2)
            #expect((stored.json["subjects"] as? [[String: Any]])?.first?["topic_ids"] as? [String] == ["math.quadratics"])
            let catalogue = try await client.call(.get, "/api/v1/subjects", as: learner)
            let subjects = (catalogue.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            #expect(Set(subjects).isSuperset(of: ["math", "physics", "chemistry", "biology", "english", "japanese"]))
        }
    }

    @Test("notifications_enabled: true by default and when left out or null on PUT, false when sent so; always in GET")
    func notificationsEnabled() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            #expect(try await client.call(.get, "/api/v1/settings", as: learner).json["notifications_enabled"] as? Bool == true)
            let off = Self.valid.dropLast() + #","notifications_enabled":false}"#
            let stored = try await client.call(.put, "/api/v1/settings", as: learner, json: String(off))
            #expect(stored.status == .ok)
            #expect(stored.json["notifications_enabled"] as? Bool == false)
            #expect(try await client.call(.get, "/api/v1/settings", as: learner).json["notifications_enabled"] as? Bool == false)
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: Self.valid).json["notifications_enabled"] as? Bool == true)
            _ = try await client.call(.put, "/api/v1/settings", as: learner, json: String(off))
            let null = Self.valid.dropLast() + #","notifications_enabled":null}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: String(null)).json["notifications_enabled"] as? Bool == true)
            let wrong = Self.valid.dropLast() + #","notifications_enabled":"no"}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: String(wrong)).status == .unprocessableContent)
        }
    }

    @Test("a read while settings are being replaced sees one whole document, never parts of two")
    func wholeDocuments() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: Self.valid).status == .ok)
            let (locked, signal) = AsyncStream.makeStream(of: Void.self)
            // Another session replaces the document (as a PUT does) while it holds the subjects'
            // table, so that a read of the subjects waits for its commit.
            let replacement = Task {
                defer { signal.finish() }
                try await database.withClient { other in
                    try await other.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                        _ = try await connection.query("LOCK TABLE user_subject_prefs IN ACCESS EXCLUSIVE MODE", logger: TestEnvironment.quietLogger)
                        signal.finish()
                        // Until the read waits for this lock.
                        #expect(try await connection.awaitLockWaiter(on: "user_subject_prefs"), "the read never waited for the replacement's lock")
                        _ = try await connection.query(
                            "UPDATE user_settings SET theme = 'light' WHERE user_id = \(learner.id)", logger: TestEnvironment.quietLogger)
                        _ = try await connection.query(
                            "UPDATE user_subject_prefs SET subject_id = 'physics', topic_ids = '{}' WHERE user_id = \(learner.id)",
                            logger: TestEnvironment.quietLogger)
                    }
                }
            }
            for await _ in locked {}
            let read = try await client.call(.get, "/api/v1/settings", as: learner)
            try await replacement.value
            let subjects = (read.json["subjects"] as? [[String: Any]] ?? []).compactMap { $0["subject_id"] as? String }
            let document = "\(read.json["theme"] as? String ?? "?") \(subjects)"
            #expect(document == "light [\"physics\"]", "\(document)")
        }
    }

    @Test(
        "each invalid field is 422 naming it, with the contract's code, and nothing changes",
        arguments: [
            ("notification_window.start", #""start":"07:30""#, #""start":"25:00""#, "validation_failed"),
            ("notification_window.start", #""start":"07:30""#, #""start":"+1:30""#, "validation_failed"),
            ("notification_window.end", #""end":"21:00""#, #""end":"1:+05""#, "validation_failed"),
            ("notification_window.end", #""end":"21:00""#, #""end":"1:005""#, "validation_failed"),
            ("notification_window.end", #""end":"21:00""#, #""end":"07:30""#, "validation_failed"),
            ("notification_window.timezone", #""timezone":"Europe/Paris""#, #""timezone":"GMT+05:30""#, "validation_failed"),
            ("notification_window.timezone", #""timezone":"Europe/Paris""#, #""timezone":"GMT+5""#, "validation_failed"),
            ("notification_window.timezone", #""timezone":"Europe/Paris""#, #""timezone":"Asia""#, "validation_failed"),
            ("notification_window.timezone", #""timezone":"Europe/Paris""#, #""timezone":"Mars/Olympus_Mons""#, "validation_failed"),
            ("theme", #""theme":"dark""#, #""theme":"neon""#, "validation_failed"),
            ("difficulty", #""difficulty":2,"notification"#, #""difficulty":9,"notification"#, "validation_failed"),
            ("subjects[0].subject_id", #""subject_id":"math""#, #""subject_id":"alchemy""#, "unknown_subject"),
            ("subjects[0].topic_ids", #""topic_ids":["math.quadratics"]"#, #""topic_ids":["physics.waves"]"#, "unknown_topic"),
        ])
    func invalidFields(field: String, from: String, to: String, code: String) async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let body = Self.valid.replacingOccurrences(of: from, with: to)
            #expect(body != Self.valid)
            let response = try await client.call(.put, "/api/v1/settings", as: learner, json: body)
            #expect(response.status == .unprocessableContent && response.errorCode == code, "\(response.text)")
            #expect((response.json["message"] as? String)?.contains(field.components(separatedBy: "[").first ?? field) == true, "\(response.text)")
            let unchanged = try await client.call(.get, "/api/v1/settings", as: learner)
            #expect(unchanged.json["theme"] as? String == "system")
        }
    }

    @Test(
        "any zone of the system's zone database is accepted and stored as sent",
        arguments: [
            "Asia/Kolkata", "UTC", "Etc/GMT-9", "America/Argentina/Buenos_Aires",
        ])
    func zoneNames(zone: String) async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let body = Self.valid.replacingOccurrences(of: "Europe/Paris", with: zone)
            let response = try await client.call(.put, "/api/v1/settings", as: learner, json: body)
            #expect(response.status == .ok, "\(response.text)")
            let stored = try await client.call(.get, "/api/v1/settings", as: learner)
            #expect((stored.json["notification_window"] as? [String: Any])?["timezone"] as? String == zone)
        }
    }
}
