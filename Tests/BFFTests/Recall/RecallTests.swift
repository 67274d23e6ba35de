import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// The re-recall loop over HTTP on a real database (M-004, UC-002): an evaluation schedules a recall
/// inside the window; opened, re-evaluated, canceled; another user's is 404.
@Suite("Re-recall", .needsDatabase, .timeLimit(.minutes(3)))
struct RecallTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    init(database: DatabaseURL) {
        self.database = database
    }

    /// A window of four hours around now, in UTC, so that a recall due in seconds lies inside it.
    static func windowAroundNow() -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        func hhmm(_ date: Date) -> String {
            let parts = calendar.dateComponents([.hour, .minute], from: date)
            return String(format: "%02d:%02d", parts.hour!, parts.minute!)
        }
        let now = Date()
        return
            #"{"subjects":[],"difficulty":3,"notification_window":{"start":"\#(hhmm(now.addingTimeInterval(-7_200)))","end":"\#(hhmm(now.addingTimeInterval(7_200)))","timezone":"UTC"},"theme":"system"}"#
    }

    static let evaluation = #"{"score":5,"note":"got it"}"#

    /// A chat with one tag, evaluated with `score`; returns the chat's id.
    static func evaluatedChat(
        _ client: some TestClientProtocol, _ learner: Learner, _ repository: ChatStore, score: Int = 5, chat json: String = #"{"title":"Forces and motion"}"#
    ) async throws -> String {
        let chat = try #require(try await client.call(.post, "/api/v1/chats", as: learner, json: json).json["id"] as? String)
        try await repository.attachTag(userID: learner.id, chatID: try #require(UUID(uuidString: chat)), code: "physics.force_implies_motion", mastery: 0.6)
        let body = #"{"score":\#(score)}"#
        let evaluated = try await client.call(.post, "/api/v1/chats/\(chat)/evaluation", as: learner, json: body)
        #expect(evaluated.status == .ok, "\(evaluated.text)")
        return chat
    }

    static func recalls(_ client: some TestClientProtocol, _ learner: Learner, query: String = "") async throws -> [[String: Any]] {
        let list = try await client.call(.get, "/api/v1/recalls\(query)", as: learner)
        #expect(list.status == .ok, "\(list.text)")
        return list.json["items"] as? [[String: Any]] ?? []
    }

    func interval(of recall: String) async throws -> Double {
        try await database.withClient { client in
            for try await value in try await client.query("SELECT interval_seconds FROM recalls WHERE id = \(UUID(uuidString: recall)!)").decode(Double.self) {
                return value
            }
            throw TestSetupError("no recall \(recall)")
        }
    }

    /// A live app without job workers, and a repository of its own for the tests' set-up.
    func withApp(_ body: @escaping @Sendable (any TestClientProtocol, ChatStore) async throws -> Void) async throws {
        let repository = ChatStore.withOwnBatcher(Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2))))
        let app = try await makeTestApp(database: database, environment: ["BFF_JOBS_CONCURRENCY": "0"])
        try await Commands.withDatabase(repository.database.client) { _ in
            try await app.live { client async throws in try await body(client, repository) }
        }
    }

    @Test("evaluating a chat schedules its recall inside the learner's window, listed with the chat's title and tags; another learner sees none")
    func scheduledInWindow() async throws {
        let learner = try await Learner.make(database: database)
        let other = try await Learner.make(database: database)
        try await withApp { client, repository in
            // 21:00-07:00 in New York: across midnight, in another zone than the server's.
            let window = #"{"subjects":[],"difficulty":3,"notification_window":{"start":"21:00","end":"07:00","timezone":"America/New_York"},"theme":"system"}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: window).status == .ok)
            let chat = try await Self.evaluatedChat(client, learner, repository)
            let items = try await Self.recalls(client, learner)
            #expect(items.count == 1)
            let recall = try #require(items.first)
            #expect(recall["chat_id"] as? String == chat)
            #expect(recall["chat_title"] as? String == "Forces and motion")
            #expect(recall["status"] as? String == "scheduled")
            #expect((recall["tags"] as? [[String: Any]])?.compactMap { $0["code"] as? String } == ["physics.force_implies_motion"])
            let due = try #require(RFC3339Dates.dateOrNil(recall["due_at"] as? String))
            #expect(NotificationWindow(start: "21:00", end: "07:00", zone: "America/New_York").contains(due), "\(due)")
            #expect(due > Date().addingTimeInterval(3_600), "a strong evaluation comes back after days, not now")
            let id = try #require(recall["id"] as? String)
            #expect(try await client.call(.get, "/api/v1/recalls/\(id)", as: learner).json["id"] as? String == id)
            #expect(try await Self.recalls(client, other).isEmpty)
            for path in ["/api/v1/recalls/\(id)"] {
                let response = try await client.call(.get, path, as: other)
                #expect(response.status == .notFound)
            }
            #expect(try await client.call(.post, "/api/v1/recalls/\(id)/opened", as: other).status == .notFound)
            #expect(try await client.call(.post, "/api/v1/recalls/\(id)/evaluation", as: other, json: Self.evaluation).status == .notFound)
            #expect(try await client.call(.get, "/api/v1/recalls/not-a-uuid", as: learner).status == .unprocessableContent)
            // The window moves: the pending recall moves with it.
            let morning = #"{"subjects":[],"difficulty":3,"notification_window":{"start":"08:00","end":"09:00","timezone":"Asia/Tokyo"},"theme":"system"}"#
            #expect(try await client.call(.put, "/api/v1/settings", as: learner, json: morning).status == .ok)
            let moved = try #require(RFC3339Dates.dateOrNil(try await Self.recalls(client, learner).first?["due_at"] as? String))
            #expect(NotificationWindow(start: "08:00", end: "09:00", zone: "Asia/Tokyo").contains(moved), "\(moved)")
        }
    }

    @Test("opened reopens the chat; the re-evaluation completes the recall, ends the chat and schedules a longer next one; done is 409")
    func openedAndEvaluated() async throws {
        let learner = try await Learner.make(database: database)
        try await withApp { client, repository in
            let chat = try await Self.evaluatedChat(client, learner, repository)
            let first = try #require(try await Self.recalls(client, learner).first?["id"] as? String)
            let firstInterval = try await interval(of: first)
            for _ in 0..<2 {
                #expect(try await client.call(.post, "/api/v1/recalls/\(first)/opened", as: learner).status == .noContent)
            }
            #expect(try await client.call(.get, "/api/v1/chats/\(chat)", as: learner).json["status"] as? String == "in_progress")
            #expect(try await client.call(.get, "/api/v1/recalls/\(first)", as: learner).json["status"] as? String == "opened")
            for bad in [#"{"score":0}"#, #"{"score":6}"#, #"{}"#, #"{"score":3,"note":"\#(String(repeating: "x", count: 1001))"}"#] {
                #expect(try await client.call(.post, "/api/v1/recalls/\(first)/evaluation", as: learner, json: bad).status == .unprocessableContent)
            }
            let evaluated = try await client.call(.post, "/api/v1/recalls/\(first)/evaluation", as: learner, json: Self.evaluation)
            #expect(evaluated.status == .ok, "\(evaluated.text)")
            let next = try #require(evaluated.json["id"] as? String)
            #expect(next != first)
            #expect(evaluated.json["status"] as? String == "scheduled")
            #expect(evaluated.json["chat_id"] as? String == chat)
            #expect(try await interval(of: next) > firstInterval)
            #expect(try await client.call(.get, "/api/v1/recalls/\(first)", as: learner).json["status"] as? String == "done")
            #expect(try await client.call(.get, "/api/v1/chats/\(chat)", as: learner).json["status"] as? String == "ended")
            let again = try await client.call(.post, "/api/v1/recalls/\(first)/evaluation", as: learner, json: Self.evaluation)
            #expect(again.status == .conflict)
            #expect(again.errorCode == "recall_done")
            // Done is not opened again, and says so quietly.
            #expect(try await client.call(.post, "/api/v1/recalls/\(first)/opened", as: learner).status == .noContent)
            #expect(try await client.call(.get, "/api/v1/recalls/\(first)", as: learner).json["status"] as? String == "done")
            // Mastery moved towards the score.
            let tags = try await client.call(.get, "/api/v1/chats/\(chat)/tags", as: learner).json["items"] as? [[String: Any]]
            #expect((tags?.first?["mastery"] as? Double ?? 0) > 0.6)
            // Listing by status.
            #expect(try await Self.recalls(client, learner, query: "?status=done").compactMap { $0["id"] as? String } == [first])
            #expect(try await Self.recalls(client, learner, query: "?status=scheduled&status=sent").compactMap { $0["id"] as? String } == [next])
        }
    }

    @Test("deleting a chat cancels its recall: opening or evaluating it is 409 recall_canceled")
    func canceledWithTheChat() async throws {
        let learner = try await Learner.make(database: database)
        try await withApp { client, repository in
            let chat = try await Self.evaluatedChat(client, learner, repository)
            let recall = try #require(try await Self.recalls(client, learner).first?["id"] as? String)
            #expect(try await client.call(.delete, "/api/v1/chats/\(chat)", as: learner).status == .noContent)
            #expect(try await client.call(.get, "/api/v1/recalls/\(recall)", as: learner).json["status"] as? String == "canceled")
            let opened = try await client.call(.post, "/api/v1/recalls/\(recall)/opened", as: learner)
            #expect(opened.status == .conflict)
            #expect(opened.errorCode == "recall_canceled")
            let evaluated = try await client.call(.post, "/api/v1/recalls/\(recall)/evaluation", as: learner, json: Self.evaluation)
            #expect(evaluated.status == .conflict)
            #expect(evaluated.errorCode == "recall_canceled")
        }
    }

    @Test("deleting a chat while its recall is opened or evaluated, at the same moment: each answers its documented status, never a deadlock's 500")
    func raceWithChatDeletion() async throws {
        let learner = try await Learner.make(database: database)
        try await withApp { client, repository in
            let port = try #require(client.port)
            @Sendable func send(_ method: HTTPMethod, _ path: String, json: String? = nil) async throws -> UInt {
                try await learner.send(method, port: port, path, json: json)
            }
            var statuses: Set<UInt> = []
            for round in 0..<12 {
                let chat = try await Self.evaluatedChat(client, learner, repository)
                let recall = try #require(try await Self.recalls(client, learner).first { $0["chat_id"] as? String == chat }?["id"] as? String)
                let outcomes = try await withThrowingTaskGroup(of: UInt.self) { group in
                    group.addTask { try await send(.DELETE, "/api/v1/chats/\(chat)") }
                    group.addTask {
                        round % 2 == 0
                            ? try await send(.POST, "/api/v1/recalls/\(recall)/opened")
                            : try await send(.POST, "/api/v1/recalls/\(recall)/evaluation", json: Self.evaluation)
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                statuses.formUnion(outcomes)
            }
            #expect(statuses.isSubset(of: [200, 204, 409]), "\(statuses)")
        }
    }

    @Test("the recall list pages soonest first with a cursor bound to its status filter")
    func paging() async throws {
        let learner = try await Learner.make(database: database)
        try await withApp { client, repository in
            for score in [1, 3, 5, 2, 4] { _ = try await Self.evaluatedChat(client, learner, repository, score: score) }
            var seen: [[String: Any]] = []
            var cursor: String?
            for _ in 0..<10 {
                let page = try await client.call(.get, "/api/v1/recalls?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), as: learner)
                #expect(page.status == .ok)
                seen += page.json["items"] as? [[String: Any]] ?? []
                cursor = page.json["next_cursor"] as? String
                if cursor == nil { break }
            }
            #expect(seen.count == 5)
            let dues = seen.compactMap { RFC3339Dates.dateOrNil($0["due_at"] as? String) }
            #expect(dues == dues.sorted())
            let first = try await client.call(.get, "/api/v1/recalls?limit=2", as: learner)
            let foreign = try #require(first.json["next_cursor"] as? String)
            #expect(try await client.call(.get, "/api/v1/recalls?limit=2&status=done&cursor=\(foreign)", as: learner).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/v1/recalls?limit=0", as: learner).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/v1/recalls?limit=201", as: learner).status == .unprocessableContent)
            #expect(try await client.call(.get, "/api/v1/recalls?status=lost", as: learner).status == .unprocessableContent)
        }
    }
}

extension RFC3339Dates {
    static func dateOrNil(_ text: String?) -> Date? {
        text.flatMap { try? RFC3339Dates().decode($0) }
    }
}
