import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The plan's turns a day cannot be skipped: a turn is reserved before the LLM is asked, and given
/// back only when nothing of it reached the learner.
@Suite("Turn quota", .needsDatabase, .timeLimit(.minutes(3)))
struct TurnQuotaTests {
    let turns: ChatTurnTests

    init() async throws {
        turns = try await ChatTurnTests()
    }

    static func freeTurns(_ count: Int) -> [String: String] {
        ["BFF_PLAN_LIMITS": #"{"free": {"turns_per_day": \#(count)}}"#]
    }

    static let message = #"{"message": "植物は光合成をします。"}"#

    func used(_ learner: Learner) async throws -> Int {
        try await turns.database.withClient { client in
            for try await count in try await client.query("SELECT coalesce(sum(turns), 0)::int FROM plan_usage WHERE user_id = \(learner.id)").decode(Int.self) {
                return count
            }
            return -1
        }
    }

    /// The turns the LLM was asked for (tag extraction aside).
    static func asked(_ llm: LocalLLM) -> Int {
        llm.received.withLockedValue { $0.filter { $0.responseFormat == nil }.count }
    }

    @Test("a chat deleted on the first delta still spends the turn: the learner got the reply, the next turn is 429 quota_exceeded")
    func deleteMidStream() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして", "葉は", "緑", "なの", "？"], interval: .milliseconds(200)) }
        try await turns.withTurns(llm, environment: Self.freeTurns(2)) { client, learner in
            let first = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
            #expect(first.status == .ok)
            let chatID = try #require(first.json["chat_id"] as? String)
            let port = try #require(client.port)
            let deletion = NIOLockedValueBox<Task<UInt, any Error>?>(nil)
            let outcome = try await turns.stream(
                port: port, as: learner, json: #"{"chat_id": "\#(chatID)", "message": "葉緑体です"}"#
            ) { name, _, _ in
                if name == "delta" {
                    deletion.withLockedValue { task in
                        guard task == nil else { return }
                        task = Task { try await learner.send(.DELETE, port: port, "/api/v1/chats/\(chatID)") }
                    }
                }
                return true
            }
            let deleted = try await #require(deletion.withLockedValue { $0 }).value
            #expect(deleted == 204)
            #expect(outcome.events.filter { $0.0 == "delta" }.count == 5, "the whole reply reached the learner")
            #expect(outcome.events.last?.0 == "error")
            #expect(try await used(learner) == 2)
            let next = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
            #expect(next.status == .tooManyRequests && next.errorCode == "quota_exceeded", "\(next.text)")
        }
    }

    @Test("at 19 of 20, five turns at once: exactly one is answered, four are 429 quota_exceeded, the LLM is asked once")
    func concurrentLastSlot() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして？"], firstChunkAfter: .milliseconds(200)) }
        try await turns.withTurns(llm, environment: Self.freeTurns(20)) { client, learner in
            try await turns.database.withClient { client in
                _ = try await client.query(
                    """
                    INSERT INTO plan_usage (user_id, day, turns, zone, ends_at)
                    SELECT \(learner.id), day, 19, zone, ends_at FROM bff_learner_day(\(learner.id), 'Asia/Tokyo')
                    """)
            }
            let port = try #require(client.port)
            let statuses = try await withThrowingTaskGroup(of: UInt.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        try await HTTPClient.shared.execute(turns.turnRequest(port: port, as: learner, json: Self.message), timeout: .seconds(20)).status.code
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }.sorted()
            }
            #expect(statuses == [200, 429, 429, 429, 429])
            #expect(Self.asked(llm) == 1)
            #expect(try await used(learner) == 20)
        }
    }

    @Test("switching the time zone to UTC+14 or UTC-12 after the day's turns opens no new allowance")
    func zoneBorrowing() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして？"]) }
        try await turns.withTurns(llm, environment: Self.freeTurns(2)) { client, learner in
            for _ in 0..<2 { #expect(try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message).status == .ok) }
            for zone in ["Pacific/Kiritimati", "Etc/GMT+12"] {
                let settings = #"{"subjects":[],"difficulty":3,"notification_window":{"start":"08:00","end":"18:00","timezone":"\#(zone)"},"theme":"system"}"#
                let saved = try await client.call(.put, "/api/v1/settings", as: learner, json: settings)
                #expect(saved.status == .ok, "\(saved.text)")
                let refused = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
                #expect(refused.status == .tooManyRequests && refused.errorCode == "quota_exceeded", "\(zone): \(refused.text)")
            }
            #expect(Self.asked(llm) == 2)
        }
    }

    @Test(
        "a turn refused as it is admitted costs no turn of the day: past the rate limit (429 rate_limited), a key whose first turn still runs (409); a chat the learner does not have counts nothing at all"
    )
    func refusedAdmissionsCostNothing() async throws {
        let llm = LocalLLM { request, _ in
            request.messages.last?.content == "ゆっくり" ? .reply(["遅い返事"], firstChunkAfter: .seconds(1.5)) : .reply(["はい"])
        }
        try await turns.withTurns(llm, environment: Self.freeTurns(20)) { client, learner in
            let missing = try await client.call(.post, "/api/v1/chat", as: learner, json: #"{"chat_id": "\#(UUID())", "message": "続き"}"#)
            #expect(missing.status == .notFound, "\(missing.text)")
            #expect(try await used(learner) == 0)

            let port = try #require(client.port)
            let running = Task {
                try await HTTPClient.shared.execute(
                    turns.turnRequest(port: port, as: learner, json: #"{"message":"ゆっくり"}"#, headers: [("Idempotency-Key", "slow")]), timeout: .seconds(10)
                ).status.code
            }
            #expect(try await eventually(within: .seconds(5)) { Self.asked(llm) == 1 })
            let busy = try await client.call(
                .post, "/api/v1/chat", as: learner, json: #"{"message":"ゆっくり"}"#, headers: [HTTPField.Name("Idempotency-Key")!: "slow"])
            #expect(busy.status == .conflict && busy.errorCode == "idempotency_in_progress", "\(busy.text)")
            #expect(try await running.value == 200)
            #expect(try await used(learner) == 1)

            // Ten at once, past the rate limit: each one refused gives its reserved turn back, whatever the
            // limit has refilled meanwhile.
            let statuses = try await withThrowingTaskGroup(of: UInt.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await HTTPClient.shared.execute(turns.turnRequest(port: port, as: learner, json: Self.message), timeout: .seconds(20)).status.code
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let answered = statuses.filter { $0 == 200 }.count
            #expect(statuses.contains(429) && statuses.allSatisfy { $0 == 200 || $0 == 429 }, "\(statuses)")
            #expect(try await used(learner) == 1 + answered)
            #expect(Self.asked(llm) == 1 + answered)
        }
    }

    @Test("a turn that reached nobody is given back: a JSON turn whose LLM failed, a stream that failed before its first delta")
    func failedTurnsAreGivenBack() async throws {
        let llm = LocalLLM { _, number in
            switch number {
            case 1: .status(500, code: "server_error", message: "boom")
            case 2: .status(503, code: "overloaded", message: "busy")
            default: .reply(["どうして？"])
            }
        }
        try await turns.withTurns(llm, environment: Self.freeTurns(1)) { client, learner in
            let failed = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
            #expect(failed.status == .serviceUnavailable && failed.errorCode == "llm_unavailable", "\(failed.text)")
            #expect(try await used(learner) == 0)
            let streamed = try await turns.stream(port: try #require(client.port), as: learner, json: Self.message)
            #expect(streamed.events.map(\.0) == ["error"], "\(streamed.events)")
            #expect(try await used(learner) == 0)
            #expect(try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message).status == .ok)
            #expect(try await used(learner) == 1)
        }
    }

    @Test("a chat evaluated (ended) while the LLM answers is not written to: the stream ends with chat_ended and nothing is stored")
    func endedWhileAnswering() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして", "葉は", "緑？"], interval: .milliseconds(300)) }
        try await turns.withTurns(llm) { client, learner in
            let first = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
            let chatID = try #require(first.json["chat_id"] as? String)
            let port = try #require(client.port)
            let ending = NIOLockedValueBox<Task<UInt, any Error>?>(nil)
            let outcome = try await turns.stream(port: port, as: learner, json: #"{"chat_id": "\#(chatID)", "message": "続きです"}"#) { name, _, _ in
                if name == "delta" {
                    ending.withLockedValue { task in
                        guard task == nil else { return }
                        task = Task { try await learner.send(.POST, port: port, "/api/v1/chats/\(chatID)/evaluation", json: #"{"score":4}"#) }
                    }
                }
                return true
            }
            #expect(try await #require(ending.withLockedValue { $0 }).value == 200)
            let error = try #require(outcome.events.last)
            #expect(error.0 == "error" && error.1.contains("chat_ended"), "\(outcome.events)")
            let messages = try await client.call(.get, "/api/v1/chats/\(chatID)/messages", as: learner)
            #expect((messages.json["items"] as? [Any])?.count == 2, "only the first turn's messages")
        }
    }

    @Test("a client that leaves after the first delta has spent its turn")
    func leavingAfterFirstDelta() async throws {
        let llm = LocalLLM { _, _ in .reply(["どうして", "葉は", "緑？"], interval: .milliseconds(200)) }
        try await turns.withTurns(llm, environment: Self.freeTurns(1)) { client, learner in
            let outcome = try await turns.stream(port: try #require(client.port), as: learner, json: Self.message) { name, _, _ in name != "delta" }
            #expect(outcome.events.map(\.0) == ["delta"])
            // The reply is completed and stored without the client.
            #expect(
                try await eventually {
                    try await turns.database.withClient { client in
                        for try await count in try await client.query("SELECT count(*)::int FROM messages WHERE user_id = \(learner.id)").decode(Int.self) {
                            return count == 2
                        }
                        return false
                    }
                })
            #expect(try await used(learner) == 1)
            let next = try await client.call(.post, "/api/v1/chat", as: learner, json: Self.message)
            #expect(next.status == .tooManyRequests && next.errorCode == "quota_exceeded")
        }
    }
}
