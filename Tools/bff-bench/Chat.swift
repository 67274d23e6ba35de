import AsyncHTTPClient
import BFF
import BFFPlatform
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

// MARK: - chat: the tutoring turn against the running server and llm-stand-in

/// Streaming turns by as many learners at once (each its own learner: the limit is per user), then
/// JSON turns, then `open` slow streams held open together while the server's memory is read. The
/// added latency is the client's first delta (or, for JSON, its answer) minus the time llm-stand-in
/// sent the first (or last) chunk of that turn's reply (its `--timings` file), so the stand-in's own
/// pace is not charged to the BFF.
func benchChat(_ options: Options) async throws {
    let turns = try options.int("turns", default: 200)
    let jsonTurns = try options.int("json", default: 50)
    let open = try options.int("open", default: 1_000)
    let server = try options.string("server")
    let timingsPath = try options.string("timings")
    let serverPID = try options.int("server-pid", default: 1)
    let url = try DatabaseURL(parsing: try options.string("database"))
    let logger = benchLogger()
    let configuration = try TokenConfiguration(environment: ProcessInfo.processInfo.environment)
    let tokens = AccessTokens(keyRing: configuration.jwtKeys, issuer: configuration.jwtIssuer, audience: configuration.jwtAudience, lifetime: .seconds(3600))
    let users = (0..<(turns + jsonTurns + open)).map { _ in UUID() }
    let database = Database(configuration: url, perEventLoopOf: .singleton, timeout: .seconds(30), poolSize: 2, logger: logger)
    try await Commands.withDatabase(database) { client in
        _ = try await client.query(
            """
            INSERT INTO users (id, issuer, subject, display_name)
            SELECT u, 'urn:bff:bench', 'bench-chat-' || u, 'Bench learner' FROM unnest(\(users)::uuid[]) AS u
            """)
    }
    let access = users.map { user in
        tokens.issue(userID: user, deviceID: "bench-chat-\(user.uuidString.prefix(8))", familyID: UUID(), scopes: ["chat:rw"], tokenID: randomBase64URL(bytes: 16), issuedAt: Date())
    }
    var pool = HTTPClient.Configuration()
    pool.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: open + turns)
    pool.timeout = .init(connect: .seconds(10), read: .seconds(60))
    let http = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: pool)
    defer { _ = http.shutdown() }

    /// One turn; returns when the first delta arrived (streams) and when the answer ended.
    @Sendable func turn(_ index: Int, message: String, stream: Bool, onFirst: @escaping @Sendable () -> Void = {}) async throws -> (first: Date?, end: Date) {
        var request = HTTPClientRequest(url: "\(server)/api/v1/chat")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(access[index])")
        request.headers.add(name: "Content-Type", value: "application/json")
        if stream { request.headers.add(name: "Accept", value: "text/event-stream") }
        request.body = .bytes(ByteBuffer(string: #"{"message":"\#(message)"}"#))
        let response = try await http.execute(request, timeout: .seconds(120))
        guard response.status == .ok else {
            throw Failure("turn \(index): \(response.status.code) \(String(buffer: try await response.body.collect(upTo: 65536)))")
        }
        var first: Date?
        var text = ""
        for try await buffer in response.body {
            if stream, first == nil {
                text += String(buffer: buffer)
                if text.contains("event: delta") {
                    first = Date()
                    onFirst()
                }
            }
        }
        return (first, Date())
    }

    func stamps() throws -> [String: (first: Double, last: Double)] {
        var stamps: [String: (Double, Double)] = [:]
        for line in try readLines(timingsPath) {
            let parts = line.split(separator: " ")
            guard parts.count == 3, let first = Double(parts[0]), let last = Double(parts[1]) else { continue }
            stamps[String(parts[2])] = (first, last)
        }
        return stamps
    }

    func summary(_ values: [Double]) -> (p50: Double, p95: Double, p99: Double) {
        let sorted = values.sorted()
        func at(_ p: Double) -> Double { sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))] }
        return (at(0.5), at(0.95), at(0.99))
    }

    // Streaming turns, all at once.
    let started = Date()
    let streamed = try await withThrowingTaskGroup(of: (Int, Date?, Date).self) { group in
        for index in 0..<turns {
            group.addTask {
                let (first, end) = try await turn(index, message: "s\(index) 光合成について説明します。", stream: true)
                return (index, first, end)
            }
        }
        var all: [(Int, Date?, Date)] = []
        for try await result in group { all.append(result) }
        return all
    }
    let ended = streamed.map(\.2).max() ?? Date()
    var stamp = try stamps()
    let added = streamed.compactMap { index, first, _ -> Double? in
        guard let first, let sent = stamp["s\(index)"] else { return nil }
        return (first.timeIntervalSince1970 - sent.first) * 1000
    }
    guard added.count == turns else { throw Failure("matched \(added.count) of \(turns) streamed turns with the stand-in's timings") }
    let stream = summary(added)
    let rate = Double(turns) / ended.timeIntervalSince(started)
    print(
        "chat: \(turns) streaming turns at once: added latency to the first delta p50 \(format(stream.p50, 1)) ms, p95 \(format(stream.p95, 1)) ms, p99 \(format(stream.p99, 1)) ms; \(format(rate, 1)) turns/s"
    )
    result("chat_stream_added_p50_ms", stream.p50)
    result("chat_stream_added_p95_ms", stream.p95)
    result("chat_stream_added_p99_ms", stream.p99)
    result("chat_turns_per_second", rate)

    // JSON turns: the answer comes after the reply's last chunk.
    let json = try await withThrowingTaskGroup(of: (Int, Date).self) { group in
        for index in turns..<(turns + jsonTurns) {
            group.addTask { (index, try await turn(index, message: "j\(index) 重力について説明します。", stream: false).end) }
        }
        var all: [(Int, Date)] = []
        for try await result in group { all.append(result) }
        return all
    }
    stamp = try stamps()
    let jsonAdded = json.compactMap { index, end -> Double? in stamp["j\(index)"].map { (end.timeIntervalSince1970 - $0.last) * 1000 } }
    let jsonSummary = summary(jsonAdded)
    print("chat: \(jsonTurns) JSON turns at once: added latency after the reply's last chunk p50 \(format(jsonSummary.p50, 1)) ms, p95 \(format(jsonSummary.p95, 1)) ms")
    result("chat_json_added_p50_ms", jsonSummary.p50)
    result("chat_json_added_p95_ms", jsonSummary.p95)

    // Slow streams, all open at once: the server's memory while they are.
    let firsts = NIOLockedValueBox(0)
    let (allOpen, opened) = AsyncStream<Void>.makeStream()
    let rss = try await withThrowingTaskGroup(of: Int?.self) { group in
        let base = turns + jsonTurns
        for index in base..<(base + open) {
            group.addTask {
                _ = try await turn(index, message: "slow: o\(index) 説明します。", stream: true) {
                    if firsts.withLockedValue({ count in
                        count += 1
                        return count
                    }) == open {
                        opened.finish()
                    }
                }
                return nil
            }
        }
        group.addTask {
            for await _ in allOpen {}
            return memory(serverPID, "VmRSS")
        }
        var rss: Int?
        for try await value in group { if let value { rss = value } }
        return rss ?? 0
    }
    let hwm = memory(serverPID, "VmHWM") ?? 0
    print("chat: \(open) streams open at once: server VmRSS \(rss / 1024) MiB then (VmHWM so far \(hwm / 1024) MiB)")
    result("chat_open_rss_kib", rss)
    result("chat_hwm_kib", hwm)
}

/// A `/proc/PID/status` figure in KiB.
func memory(_ pid: Int, _ key: String) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}
