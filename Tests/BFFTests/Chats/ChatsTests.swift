import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Chats and history", .needsDatabase, .timeLimit(.minutes(3)))
struct ChatsTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    @Test("Idempotency-Key: 1-255 visible ASCII characters, else 422 and nothing made; a key whose first request has not finished is 409 idempotency_in_progress")
    func idempotencyKeyLimitsAndInProgress() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        let idempotencyKey = HTTPField.Name("Idempotency-Key")!
        // The first request's claim, committed without its answer yet (as a concurrent one sees it).
        try await database.withClient { client in
            _ = try await client.query(
                """
                INSERT INTO idempotency_keys (user_id, operation, key, request_hash)
                VALUES (\(learner.id), \(ChatCreation.operation), 'busy-key', sha256('{}'::bytea))
                """)
        }
        try await app.live { client in
            let longest = String(repeating: "k", count: 255)
            let accepted = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}", headers: [idempotencyKey: longest])
            #expect(accepted.status == .created, "\(accepted.text)")
            for refused in [String(repeating: "k", count: 256), "two words", "tab\tkey", "ключ"] {
                let response = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}", headers: [idempotencyKey: refused])
                #expect(response.status == .unprocessableContent && response.errorCode == "validation_failed", "\(refused): \(response.text)")
            }
            let busy = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}", headers: [idempotencyKey: "busy-key"])
            #expect(busy.status == .conflict && busy.errorCode == "idempotency_in_progress", "\(busy.text)")
        }
        let chats = try await database.withClient { [learner] client in
            try await client.query("SELECT count(*)::int FROM chats WHERE user_id = \(learner.id)").collect().first?.decode(Int.self)
        }
        #expect(chats == 1, "only the accepted request made a chat")
    }

    /// `count` chats whose updated_at are one second apart, the last one newest.
    private func seedChats(_ learner: Learner, count: Int) async throws {
        try await database.withClient { client in
            _ = try await client.query(
                """
                INSERT INTO chats (user_id, title, created_at, updated_at)
                SELECT \(learner.id), 'chat ' || n, now() - make_interval(secs => 1000 - n), now() - make_interval(secs => 1000 - n)
                FROM generate_series(1, \(count)) n
                """)
        }
    }

    private func ids(_ response: TestResponse) -> [String] {
        (response.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test("45 chats, limit 20: three pages newest first with no gap or duplicate, even while chats change between pages")
    func pagination() async throws {
        let learner = try await Learner.make(database: database)
        try await seedChats(learner, count: 45)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            var seen: [String] = []
            var titles: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let uri = "/api/v1/chats?limit=20" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.call(.get, uri, as: learner)
                #expect(page.status == .ok)
                seen += ids(page)
                titles += (page.json["items"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
                cursor = page.json["next_cursor"] as? String
                pages += 1
            } while cursor != nil && pages < 10
            // Required: the walk below indexes into what this one saw.
            try #require(pages == 3 && seen.count == 45 && Set(seen).count == 45)
            #expect(titles.first == "chat 45" && titles.last == "chat 1")

            // Walk again, renaming a chat of the last page after the first page was read.
            let first = try await client.call(.get, "/api/v1/chats?limit=20", as: learner)
            let firstFetchedAt = Date()
            let lastPageChat = seen[42]
            let renamed = try await client.call(.patch, "/api/v1/chats/\(lastPageChat)", as: learner, json: #"{"title":"moved"}"#)
            #expect(renamed.status == .ok)
            var walk = ids(first)
            cursor = first.json["next_cursor"] as? String
            // Bounded: a cursor that never ends must fail the test, not hang it.
            var walkedPages = 1
            while let next = cursor, walkedPages < 10 {
                let page = try await client.call(.get, "/api/v1/chats?limit=20&cursor=\(next)", as: learner)
                walk += ids(page)
                cursor = page.json["next_cursor"] as? String
                walkedPages += 1
            }
            #expect(cursor == nil && walkedPages == 3, "\(walkedPages) pages")
            #expect(Set(walk).count == walk.count, "no duplicates")
            #expect(Set(seen).subtracting([lastPageChat]).isSubset(of: Set(walk)), "every unchanged chat appears")
            let since = try RFC3339Dates().encode(firstFetchedAt.addingTimeInterval(-1))
            let delta = try await client.call(.get, "/api/v1/chats?updated_since=\(since)", as: learner)
            #expect(ids(delta).contains(lastPageChat), "the moved chat comes with the delta pull")
        }
    }

    @Test("limit bounds: 0, 201, 1001, -1 and non-numbers are 422; 200 and 1000 are accepted; foreign cursors are 422")
    func limits() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            let chat = try #require(created.json["id"] as? String)
            for bad in ["0", "201", "-1", "abc", "1.5", ""] {
                let response = try await client.call(.get, "/api/v1/chats?limit=\(bad)", as: learner)
                #expect(response.status == .unprocessableContent, "limit=\(bad)")
                #expect(response.errorCode == "validation_failed", "limit=\(bad)")
            }
            #expect(try await client.call(.get, "/api/v1/chats?limit=200", as: learner).status == .ok)
            for bad in ["0", "1001", "-1", "x"] {
                let response = try await client.call(.get, "/api/v1/chats/\(chat)/messages?limit=\(bad)", as: learner)
                #expect(response.status == .unprocessableContent, "messages limit=\(bad)")
            }
            #expect(try await client.call(.get, "/api/v1/chats/\(chat)/messages?limit=1000", as: learner).status == .ok)
            let mistyped = try await client.call(.get, "/api/v1/chats/\(chat)/messages?limit=x", as: learner)
            #expect(mistyped.json["message"] as? String == "query parameter: integer 型で指定してください。", "\(mistyped.text)")
            // Parameters without a value: the generated decoder's parser refuses the whole query.
            for query in ["limit", "limit=5&x", "a=1&&b=2"] {
                for path in ["/api/v1/chats/\(chat)/messages", "/api/v1/chats"] {
                    let response = try await client.call(.get, "\(path)?\(query)", as: learner)
                    #expect(response.status.code < 500, "\(path)?\(query): \(response.text)")
                    if path.hasSuffix("messages") {
                        #expect(response.status == .unprocessableContent && response.errorCode == "validation_failed", "\(query)")
                    }
                }
            }
            let messageCursor = KeysetCursor(list: .messages, micros: 1, id: UUID()).encoded()
            let foreign = try await client.call(.get, "/api/v1/chats?cursor=\(messageCursor)", as: learner)
            #expect(foreign.status == .unprocessableContent && foreign.errorCode == "invalid_cursor")
            let garbage = try await client.call(.get, "/api/v1/chats?cursor=bm9wZQ", as: learner)
            #expect(garbage.errorCode == "invalid_cursor")
        }
    }

    @Test("a cursor continues only the walk it came from: another updated_since or another chat is 422 invalid_cursor")
    func cursorsKeepTheirFilter() async throws {
        let learner = try await Learner.make(database: database)
        let repository = ChatStore.withOwnBatcher(Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2))))
        let app = try await makeTestApp(database: database)
        try await Commands.withDatabase(repository.database.client) { _ in
            try await app.live { client in
                var chats: [String] = []
                for index in 0..<3 {
                    chats.append(try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"c\#(index)"}"#).json["id"] as? String))
                }
                let since = "2025-01-01T00:00:00Z"
                let first = try await client.call(.get, "/api/v1/chats?limit=1&updated_since=\(since)", as: learner)
                let cursor = try #require(first.json["next_cursor"] as? String)
                let next = try await client.call(.get, "/api/v1/chats?limit=1&updated_since=\(since)&cursor=\(cursor)", as: learner)
                #expect(next.status == .ok && (next.json["items"] as? [[String: Any]])?.first?["id"] as? String == chats[1], "\(next.text)")
                for other in ["2025-01-01T00:00:00.001Z", "2026-01-01T00:00:00Z"] {
                    let moved = try await client.call(.get, "/api/v1/chats?limit=1&updated_since=\(other)&cursor=\(cursor)", as: learner)
                    #expect(moved.status == .unprocessableContent && moved.errorCode == "invalid_cursor", "\(other): \(moved.text)")
                }
                #expect(try await client.call(.get, "/api/v1/chats?limit=1&cursor=\(cursor)", as: learner).errorCode == "invalid_cursor")

                for chat in chats.prefix(2) {
                    for text in ["one", "two"] {
                        _ = try await repository.appendMessage(userID: learner.id, chatID: try #require(UUID(uuidString: chat)), role: "user", content: text)
                    }
                }
                let messages = try await client.call(.get, "/api/v1/chats/\(chats[0])/messages?limit=1", as: learner)
                let messageCursor = try #require(messages.json["next_cursor"] as? String)
                #expect(try await client.call(.get, "/api/v1/chats/\(chats[0])/messages?limit=1&cursor=\(messageCursor)", as: learner).status == .ok)
                let elsewhere = try await client.call(.get, "/api/v1/chats/\(chats[1])/messages?limit=1&cursor=\(messageCursor)", as: learner)
                #expect(elsewhere.status == .unprocessableContent && elsewhere.errorCode == "invalid_cursor", "\(elsewhere.text)")
            }
        }
    }

    @Test("an edited cursor whose instant PostgreSQL cannot represent is 422 invalid_cursor on every keyset list, not a 500")
    func outOfRangeCursor() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            let chat = try #require(created.json["id"] as? String)
            for micros in [Int64.max, Int64.min] {
                let uris = [
                    "/api/v1/chats?cursor=\(KeysetCursor(list: .newest, micros: micros, id: UUID()).encoded())",
                    "/api/v1/chats?updated_since=2025-01-01T00:00:00Z&cursor=\(KeysetCursor(list: .delta, micros: micros, id: UUID(), filter: "1735689600000000").encoded())",
                    "/api/v1/chats/\(chat)/messages?cursor=\(KeysetCursor(list: .messages, micros: micros, id: UUID(), filter: chat).encoded())",
                ]
                for uri in uris {
                    let response = try await client.call(.get, uri, as: learner)
                    #expect(response.status == .unprocessableContent && response.errorCode == "invalid_cursor", "\(uri)")
                }
            }
        }
    }

    @Test("text with a NUL character, which PostgreSQL cannot store, is 422 validation_failed, not a 500")
    func nulCharacters() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let subject = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"subject_id":"bio\u0000logy"}"#)
            #expect(subject.status == .unprocessableContent && subject.errorCode == "validation_failed")
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            let chat = try #require(created.json["id"] as? String)
            let note = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":3,"note":"a\u0000b"}"#)
            #expect(note.status == .unprocessableContent && note.errorCode == "validation_failed")
            let settings = try await client.call(
                .put, "/api/v1/settings", as: learner,
                json:
                    #"{"subjects":[{"subject_id":"m\u0000","topic_ids":[],"difficulty":2}],"difficulty":3,"notification_window":{"start":"18:00","end":"21:00","timezone":"Asia/Tokyo"},"theme":"system"}"#
            )
            #expect(settings.status == .unprocessableContent)
        }
    }

    @Test("a malformed or impossible date-time (trailing text, 30 February, a ten-digit hour, an offset carrying it before year 1) is 422 validation_failed and changes nothing")
    func outOfRangeDates() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let chat = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Kept"}"#).json["id"] as? String)
            for since in [
                "2025-01-01T9999999999:00:00Z", "999999999-01-01T00:00:00Z", "2025-01-01T00:00:00Zjunk", "2025-02-30T00:00:00Z",
                "0001-01-01T00:00:00+14:00",
            ] {
                let encoded = since.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let pull = try await client.call(.get, "/api/v1/chats?updated_since=\(encoded)", as: learner)
                #expect(pull.status == .unprocessableContent && pull.errorCode == "validation_failed", "\(since): \(pull.text)")
                let rename = try await client.call(.patch, "/api/v1/chats/\(chat)", as: learner, json: #"{"title":"Lost","updated_at":"\#(since)"}"#)
                #expect(rename.status == .unprocessableContent && rename.errorCode == "validation_failed", "\(since): \(rename.text)")
            }
            #expect(try await client.call(.get, "/api/v1/chats/\(chat)", as: learner).json["title"] as? String == "Kept")
        }
    }

    @Test("create: 201 with Location and a dated default title; unknown subject or topic 422; Idempotency-Key replays (after a deletion too), refuses another body, and survives concurrency")
    func createAndIdempotency() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live(.ahc(.http)) { client in
            let plain = try await client.call(.post, "/api/v1/chats", as: learner, json: "{}")
            #expect(plain.status == .created)
            #expect((plain.json["title"] as? String)?.hasPrefix("チャット 20") == true)
            #expect(plain.headers[.location] == "/api/v1/chats/\(plain.json["id"] as? String ?? "")")
            let nulls = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":null,"subject_id":null,"topic_id":null}"#)
            #expect(nulls.status == .created && (nulls.json["title"] as? String)?.hasPrefix("チャット 20") == true && nulls.json["subject_id"] == nil)
            let withTopic = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"  Quadratics  ","topic_id":"math.quadratics"}"#)
            #expect(withTopic.status == .created && withTopic.json["title"] as? String == "Quadratics")
            #expect(withTopic.json["subject_id"] as? String == "math")
            let unknownSubject = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"subject_id":"astrology"}"#)
            #expect(unknownSubject.status == .unprocessableContent && unknownSubject.errorCode == "unknown_subject")
            let mismatch = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"subject_id":"physics","topic_id":"math.quadratics"}"#)
            #expect(mismatch.errorCode == "unknown_topic")

            let key: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "retry-key-1"]
            let first = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Once"}"#, headers: key)
            let second = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Once"}"#, headers: key)
            #expect(first.status == .created && second.status == .created)
            #expect(first.json["id"] as? String == second.json["id"] as? String)
            #expect(first.json["created_at"] as? String == second.json["created_at"] as? String)
            let other = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Twice"}"#, headers: key)
            #expect(other.status == .unprocessableContent && other.errorCode == "idempotency_key_reused")
            // A retry whose chat was deleted meanwhile still gets the first response, and makes no chat.
            let goneKey: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "retry-key-2"]
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Gone"}"#, headers: goneKey)
            let createdID = try #require(created.json["id"] as? String)
            #expect(try await client.call(.delete, "/api/v1/chats/\(createdID)", as: learner).status == .noContent)
            let replayed = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Gone"}"#, headers: goneKey)
            #expect(
                replayed.status == .created && NSDictionary(dictionary: replayed.json) == NSDictionary(dictionary: created.json),
                "\(replayed.status) \(replayed.text)")
            #expect(replayed.headers[.location] == "/api/v1/chats/\(createdID)")

            let concurrentKey: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "concurrent-key"]
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let response = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Race"}"#, headers: concurrentKey)
                        return (response.status, response.json["id"] as? String)
                    }
                }
                var all: [(HTTPResponse.Status, String?)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(statuses.allSatisfy { $0.0 == .created })
            #expect(Set(statuses.compactMap(\.1)).count == 1)

            // Keys are compared as sent: no percent-decoding.
            var ids: [String] = []
            for raw in ["100%", "a%41", "aA", "100%"] {
                let response = try await client.call(
                    .post, "/api/v1/chats", as: learner, json: #"{"title":"Raw"}"#, headers: [HTTPField.Name("Idempotency-Key")!: raw])
                #expect(response.status == .created, "\(raw): \(response.text)")
                ids.append(response.json["id"] as? String ?? "")
            }
            #expect(Set(ids).count == 3 && ids[0] == ids[3])
        }
        let counts = try await database.withClient { [learner] client in
            let rows = try await client.query("SELECT title, count(*)::int FROM chats WHERE user_id = \(learner.id) GROUP BY title")
            var counts: [String: Int] = [:]
            for try await (title, count) in rows.decode((String, Int).self) { counts[title] = count }
            return counts
        }
        #expect(counts["Once"] == 1 && counts["Race"] == 1 && counts["Twice"] == nil && counts["Raw"] == 3 && counts["Gone"] == nil)

        // Housekeeping drops keys past their lifetime and keeps the others.
        let keys = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 1)))
        let remaining = try await Commands.withDatabase(keys.client) { [learner] client in
            _ = try await client.query(
                "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE user_id = \(learner.id) AND key = 'retry-key-1'")
            try await IdempotencyStore.purgeExpired(database: keys)
            var remaining: Set<String> = []
            for try await key in try await client.query("SELECT key FROM idempotency_keys WHERE user_id = \(learner.id)").decode(String.self) {
                remaining.insert(key)
            }
            return remaining
        }
        #expect(remaining == ["retry-key-2", "concurrent-key", "100%", "a%41", "aA"])
    }

    @Test("an Accept that allows no JSON is 400 not_acceptable before the operation runs: nothing is created or renamed")
    func acceptCheckedFirst() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Kept"}"#)
            let id = try #require(created.json["id"] as? String)
            for accept in ["text/html", "foo, application/json", "text/*", ";q=1"] {
                let create = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Twice"}"#, headers: [.accept: accept])
                #expect(create.status == .badRequest && create.errorCode == "not_acceptable", "\(accept): \(create.text)")
                let rename = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"Changed"}"#, headers: [.accept: accept])
                #expect(rename.status == .badRequest && rename.errorCode == "not_acceptable", "\(accept)")
            }
            for accept in ["application/json", "text/html, application/json;q=0.9", "application/*", "*/*", "APPLICATION/JSON"] {
                let me = try await client.call(.get, "/api/v1/me", as: learner, headers: [.accept: accept])
                #expect(me.status == .ok, "\(accept): \(me.text)")
            }
            let list = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect((list.json["items"] as? [[String: Any]])?.compactMap { $0["title"] as? String } == ["Kept"])
        }
    }

    @Test("rename trims and validates; an edit stamped older than the stored one is 409 stale_update and changes nothing")
    func renameAndConflicts() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Original"}"#)
            let id = try #require(created.json["id"] as? String)
            let stamp = try #require(created.json["updated_at"] as? String)
            let renamed = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"  Renamed ","updated_at":"\#(stamp)"}"#)
            #expect(renamed.status == .ok && renamed.json["title"] as? String == "Renamed", "\(renamed.text) stamp \(stamp)")
            let stale = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"Offline edit","updated_at":"\#(stamp)"}"#)
            #expect(stale.status == .conflict && stale.errorCode == "stale_update")
            let fresh = try await client.call(.get, "/api/v1/chats/\(id)", as: learner)
            #expect(fresh.json["title"] as? String == "Renamed")
            // Stored to the microsecond, sent to the millisecond: the stamp as sent passes, and one a
            // tenth of a millisecond before it is stale, however it rounds.
            try await database.withClient { admin in
                _ = try await admin.query("UPDATE chats SET updated_at = '2026-01-02T03:04:05.123456Z' WHERE id = \(UUID(uuidString: id)!)")
            }
            let earlier = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"Earlier","updated_at":"2026-01-02T03:04:05.1229Z"}"#)
            #expect(earlier.status == .conflict && earlier.errorCode == "stale_update", "\(earlier.status) \(earlier.text)")
            let echoed = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"Renamed","updated_at":"2026-01-02T12:04:05.123+09:00"}"#)
            #expect(echoed.status == .ok, "\(echoed.status) \(echoed.text)")
            let unchecked = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"Renamed","updated_at":null}"#)
            #expect(unchecked.status == .ok, "\(unchecked.status) \(unchecked.text)")
            // Lengths count code points, as the CHECK does: one "character" of 201 code points is too long.
            let combining = "a" + String(repeating: "\u{301}", count: 200)
            for bad in [
                #"{"title":""}"#, #"{"title":"   "}"#, #"{"title":"\#(String(repeating: "x", count: 201))"}"#, #"{"title":5}"#, #"{}"#,
                #"{"title":"\#(combining)"}"#, #"{"title":"\#(String(repeating: "🇯🇵", count: 101))"}"#,
            ] {
                let response = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: bad)
                #expect(response.status == .unprocessableContent, "\(bad.prefix(30))")
            }
            #expect(try await client.call(.get, "/api/v1/chats/\(id)", as: learner).json["title"] as? String == "Renamed")
            let flags = String(repeating: "🇯🇵", count: 100)
            let longest = try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"\#(flags)"}"#)
            #expect(longest.status == .ok && longest.json["title"] as? String == flags)
            #expect(try await client.call(.get, "/api/v1/chats/not-a-uuid", as: learner).status == .unprocessableContent)
        }
    }

    @Test("delete is 204 and then 404 everywhere; the delta pull returns its tombstone and renamed chats, oldest change first")
    func deleteAndDelta() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let a = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"A"}"#).json["id"] as? String)
            let b = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"B"}"#).json["id"] as? String)
            let since = try #require(try await client.call(.get, "/api/v1/chats/\(b)", as: learner).json["updated_at"] as? String)
            try await Task.sleep(for: .milliseconds(5))
            #expect(try await client.call(.patch, "/api/v1/chats/\(b)", as: learner, json: #"{"title":"B2"}"#).status == .ok)
            #expect(try await client.call(.delete, "/api/v1/chats/\(a)", as: learner).status == .noContent)
            for (method, path) in [(HTTPRequest.Method.get, ""), (.delete, ""), (.get, "/messages"), (.get, "/tags")] {
                #expect(try await client.call(method, "/api/v1/chats/\(a)\(path)", as: learner).status == .notFound)
            }
            #expect(try await client.call(.patch, "/api/v1/chats/\(a)", as: learner, json: #"{"title":"x"}"#).status == .notFound)
            let list = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect(ids(list) == [b])
            let delta = try await client.call(.get, "/api/v1/chats?updated_since=\(since)", as: learner)
            let items = delta.json["items"] as? [[String: Any]] ?? []
            #expect(items.count == 2)
            #expect(items.first?["id"] as? String == b && items.first?["title"] as? String == "B2")
            #expect(items.last?["id"] as? String == a && items.last?["deleted"] as? Bool == true)
            #expect(items.last?["title"] == nil)
        }
    }

    @Test("the delta pull misses nothing: not a change in the millisecond of one pulled, nor one that commits after a later one")
    func deltaPullInCommitOrder() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { [database] client in
            let a = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"A"}"#).json["id"] as? String)
            let b = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"B"}"#).json["id"] as? String)
            var since = "2000-01-01T00:00:00Z"
            func pull() async throws -> [[String: Any]] {
                let items = try await client.call(.get, "/api/v1/chats?limit=200&updated_since=\(since)", as: learner).json["items"] as? [[String: Any]] ?? []
                if let last = items.last?["updated_at"] as? String { since = last }
                return items
            }
            func rename(_ id: String, _ title: String) async throws {
                #expect(try await client.call(.patch, "/api/v1/chats/\(id)", as: learner, json: #"{"title":"\#(title)"}"#).status == .ok)
            }
            _ = try await pull()

            // Each rename of b follows a pull that saw a's, often within the same millisecond.
            for round in 0..<30 {
                try await rename(a, "a\(round)")
                _ = try await pull()
                try await rename(b, "b\(round)")
                let seen = try await pull()
                #expect(seen.contains { $0["id"] as? String == b && $0["title"] as? String == "b\(round)" }, "round \(round)")
            }

            // A slow writer (as a delete of a long chat is) stamps a and keeps its transaction open
            // while b is renamed and pulled; a must still reach the client.
            let held = Task {
                try await database.withClient { client in
                    try await client.withTransaction(logger: TestEnvironment.quietLogger) { connection in
                        _ = try await connection.query(
                            "UPDATE chats SET title = 'late', updated_at = bff_chat_stamp(user_id) WHERE id = \(UUID(uuidString: a)!)",
                            logger: TestEnvironment.quietLogger)
                        try await Task.sleep(for: .seconds(1))
                    }
                }
            }
            // Rename b only once the writer holds the learner's stamp lock.
            let stamped = try await database.withClient { [learner] client in
                for _ in 0..<200 {
                    let rows = try await client.query(
                        """
                        SELECT count(*)::int FROM pg_locks l
                        WHERE l.locktype = 'advisory' AND l.granted
                          AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended('bff_chat_stamp:' || \(learner.id)::text, 0)
                        """)
                    for try await count in rows.decode(Int.self) where count > 0 { return true }
                    try await Task.sleep(for: .milliseconds(50))
                }
                return false
            }
            #expect(stamped)
            try await rename(b, "after")
            var pulled = try await pull()
            try await held.value
            pulled += try await pull()
            #expect(pulled.contains { $0["id"] as? String == a && $0["title"] as? String == "late" })
            #expect(pulled.contains { $0["id"] as? String == b && $0["title"] as? String == "after" })
        }
    }

    @Test("messages: oldest first with a keyset cursor; evaluation ends the chat and moves tag mastery; bounds are 422")
    func messagesEvaluationAndTags() async throws {
        let learner = try await Learner.make(database: database)
        let repository = ChatStore.withOwnBatcher(Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2))))
        let app = try await makeTestApp(database: database)
        try await Commands.withDatabase(repository.database.client) { _ in
            try await app.live { client in
                let chat = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: #"{"title":"Forces"}"#).json["id"] as? String)
                let chatID = try #require(UUID(uuidString: chat))
                for index in 1...5 {
                    _ = try await repository.appendMessage(userID: learner.id, chatID: chatID, role: index % 2 == 0 ? "assistant" : "user", content: "m\(index)")
                }
                try await repository.attachTag(userID: learner.id, chatID: chatID, code: "physics.force_implies_motion")
                let first = try await client.call(.get, "/api/v1/chats/\(chat)/messages?limit=2", as: learner)
                let next = try #require(first.json["next_cursor"] as? String)
                let rest = try await client.call(.get, "/api/v1/chats/\(chat)/messages?limit=10&cursor=\(next)", as: learner)
                let contents = ((first.json["items"] as? [[String: Any]] ?? []) + (rest.json["items"] as? [[String: Any]] ?? [])).compactMap { $0["content"] as? String }
                #expect(contents == ["m1", "m2", "m3", "m4", "m5"])
                #expect(rest.json["next_cursor"] == nil || rest.json["next_cursor"] is NSNull)
                let detail = try await client.call(.get, "/api/v1/chats/\(chat)", as: learner)
                #expect(detail.json["message_count"] as? Int == 5 && detail.json["last_message_preview"] as? String == "m5")

                for bad in [
                    #"{"score":0}"#, #"{"score":6}"#, #"{"score":"5"}"#, #"{}"#,
                    #"{"score":3,"note":"a\#(String(repeating: "\u{301}", count: 1000))"}"#,
                ] {
                    #expect(try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: bad).status == .unprocessableContent)
                }
                let evaluated = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":5,"note":"got it"}"#)
                #expect(evaluated.status == .ok)
                let tags = evaluated.json["tags"] as? [[String: Any]] ?? []
                #expect(tags.count == 1 && (tags.first?["mastery"] as? Double ?? 0) == 0.5)
                #expect(try await client.call(.get, "/api/v1/chats/\(chat)", as: learner).json["status"] as? String == "ended")
                // A retry moves nothing; a second rating replaces the first one's effect too.
                let retried = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":5,"note":"got it"}"#)
                #expect(((retried.json["tags"] as? [[String: Any]])?.first?["mastery"] as? Double ?? -1) == 0.5)
                // A null note is no note, as the contract says of every optional request field.
                let again = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":1,"note":null}"#)
                #expect(again.status == .ok && again.json["note"] == nil, "\(again.status) \(again.text)")
                #expect(((again.json["tags"] as? [[String: Any]])?.first?["mastery"] as? Double ?? -1) == 0)
                let middle = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: #"{"score":3}"#)
                #expect(((middle.json["tags"] as? [[String: Any]])?.first?["mastery"] as? Double ?? -1) == 0.25)
                let listed = try await client.call(.get, "/api/v1/chats/\(chat)/tags", as: learner)
                #expect((listed.json["items"] as? [[String: Any]])?.first?["code"] as? String == "physics.force_implies_motion")
            }
        }
    }

    @Test("two users: every operation on another user's chat is 404 and changes nothing")
    func isolation() async throws {
        let owner = try await Learner.make(database: database)
        let intruder = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let created = try await client.call(.post, "/api/v1/chats", as: owner, json: #"{"title":"Private"}"#)
            let chat = try #require(created.json["id"] as? String)
            let attempts: [(HTTPRequest.Method, String, String?)] = [
                (.get, "", nil), (.patch, "", #"{"title":"pwned"}"#), (.delete, "", nil), (.get, "/messages", nil),
                (.get, "/tags", nil), (.post, "/evaluation", #"{"score":1}"#),
            ]
            for (method, path, body) in attempts {
                let response = try await client.call(method, "/api/v1/chats/\(chat)\(path)", as: intruder, json: body)
                #expect(response.status == .notFound && response.errorCode == "not_found", "\(method) \(path)")
            }
            #expect(ids(try await client.call(.get, "/api/v1/chats", as: intruder)).isEmpty)
            let after = try await client.call(.get, "/api/v1/chats/\(chat)", as: owner)
            #expect(after.json["title"] as? String == "Private" && after.json["status"] as? String == "in_progress")
            #expect(after.json["updated_at"] as? String == created.json["updated_at"] as? String)
        }
    }

    @Test("an account deleted while its access token still runs: its writes are 401 invalid_token, not 500, and write nothing")
    func deletedAccount() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            try await database.withClient { admin in
                _ = try await admin.query("DELETE FROM users WHERE id = \(learner.id)")
            }
            let key: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "after-deletion"]
            let writes: [(HTTPRequest.Method, String, String, HTTPFields)] = [
                (.post, "/api/v1/chats", #"{"title":"orphan"}"#, [:]),
                (.post, "/api/v1/chats", #"{"title":"orphan"}"#, key),
                (.put, "/api/v1/settings", SettingsTests.valid, [:]),
            ]
            for (method, path, body, headers) in writes {
                let response = try await client.call(method, path, as: learner, json: body, headers: headers)
                #expect(response.status == .unauthorized && response.errorCode == "invalid_token", "\(method) \(path): \(response.status) \(response.text)")
                #expect(response.headers[.wwwAuthenticate] == #"Bearer error="invalid_token""#)
            }
        }
        try await database.withClient { client in
            let rows = try await client.query(
                """
                SELECT (SELECT count(*) FROM chats WHERE user_id = \(learner.id))
                     + (SELECT count(*) FROM idempotency_keys WHERE user_id = \(learner.id))
                     + (SELECT count(*) FROM user_settings WHERE user_id = \(learner.id))
                """)
            for try await count in rows.decode(Int.self) { #expect(count == 0) }
            // The mapping tells a missing account by the constraint's name: every reference to users
            // must be a `user_id` column constraint, named `<table>_user_id_fkey` by PostgreSQL.
            let names = try await client.query(
                """
                SELECT conname::text FROM pg_constraint WHERE contype = 'f' AND confrelid = 'users'::regclass
                """)
            var references: [String] = []
            for try await name in names.decode(String.self) { references.append(name) }
            #expect(!references.isEmpty)
            #expect(references.allSatisfy { $0.hasSuffix("_user_id_fkey") }, "\(references)")
        }
    }
}
