import AsyncHTTPClient
import BFF
import BFFPlatform
import BFFWire
import Foundation
import Logging
import NIOCore
import PostgresNIO

// MARK: - push: recalls coming due, delivered through the running server and worker

/// Seeds `users` learners with two devices each (an APNs and an FCM token, a notification window
/// open all day) and `recalls` recalls whose due times are spread evenly over `spread` seconds from
/// `start-in` seconds from now, their deliveries enqueued as the server enqueues them. Then reads
/// the stand-in's log of accepted pushes (push-stand-in's stdout) until every recall has reached
/// both devices or `timeout` seconds have passed, and prints deliveries per second (from the first
/// due time to the last acceptance) and the due → accepted delay's percentiles.
///
/// With `--route notification-hubs` the worker delivers through the local hub (push-stand-in's
/// nh.env): a recall is one tag send `user:{id}` per format among the learner's tokens (apple, and
/// fcmv1 with two devices), each a line `nh-apple` or `nh-fcmv1` with the tag's end; it counts those
/// sends instead of pushes, and also prints recalls per second: the recalls whose every send was
/// accepted, from the first due time to the last acceptance.
func benchPush(_ options: Options) async throws {
    let userCount = try options.int("users", default: 2_000)
    let recallCount = try options.int("recalls", default: 10_000)
    // 2: an iPhone (APNs) and an Android phone (FCM) per learner; 1: the iPhone alone.
    let devices = try options.int("devices", default: 2)
    guard devices == 1 || devices == 2 else { throw Failure("--devices must be 1 or 2, got \(devices)") }
    let route = options.string("route", default: "direct")
    guard route == "direct" || route == "notification-hubs" else { throw Failure("--route must be direct or notification-hubs, got '\(route)'") }
    let viaHub = route == "notification-hubs"
    // The hub's send formats a recall takes: apple for the iPhone's APNs token, fcmv1 for the Android phone's.
    let hubServices: Set<Substring> = devices == 2 ? ["nh-apple", "nh-fcmv1"] : ["nh-apple"]
    let spread = Double(try options.int("spread", default: 60, allowZero: true))
    let startIn = Double(try options.int("start-in", default: 20))
    let timeout = Double(try options.int("timeout", default: 300))
    let log = try options.string("deliveries")
    let url = try DatabaseURL(parsing: try options.string("database"))
    let logger = benchLogger()
    let database = Database(configuration: url, perEventLoopOf: .singleton, timeout: .seconds(30), poolSize: 4, logger: logger)
    let clock = ContinuousClock()
    let seedStart = clock.now
    let first = Date().addingTimeInterval(startIn)

    let due: [UUID: Date] = try await Commands.withDatabase(database) { client in
        let users = (0..<userCount).map { _ in UUID() }
        try await client.withTransaction(logger: logger) { connection in
            _ = try await connection.query(
                """
                INSERT INTO users (id, issuer, subject, email, display_name)
                SELECT u, 'urn:bff:bench', 'bench-push-' || u, NULL, 'Bench learner' FROM unnest(\(users)::uuid[]) AS u
                """, logger: logger)
            _ = try await connection.query(
                """
                INSERT INTO user_settings (user_id, difficulty, notify_start, notify_end, timezone, theme)
                SELECT u, 3, '00:00', '00:00', 'Asia/Tokyo', 'system' FROM unnest(\(users)::uuid[]) AS u
                """, logger: logger)
            // An iPhone's APNs token (64 hex digits) per learner, and with two devices an Android phone's FCM token.
            _ = try await connection.query(
                """
                INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
                SELECT u, encode(sha256(convert_to(u::text || ':apns', 'UTF8')), 'hex'), 'ios', 'apns', 'bench-ios-' || u FROM unnest(\(users)::uuid[]) AS u
                """, logger: logger)
            if devices == 2 {
                _ = try await connection.query(
                    """
                    INSERT INTO push_tokens (user_id, token, platform, provider, device_id)
                    SELECT u, 'bench-fcm:' || encode(sha256(convert_to(u::text || ':fcm', 'UTF8')), 'hex'), 'android', 'fcm', 'bench-and-' || u
                    FROM unnest(\(users)::uuid[]) AS u
                    """, logger: logger)
            }
        }
        // A chat and its scheduled recall each, the recalls' users in turn, due times evenly spread.
        var due: [UUID: Date] = [:]
        var pending: [(recall: UUID, user: UUID, chat: UUID, due: Date)] = []
        for index in 0..<recallCount {
            let at = first.addingTimeInterval(recallCount > 1 ? spread * Double(index) / Double(recallCount - 1) : 0)
            let recall = (recall: UUID(), user: users[index % users.count], chat: UUID(), due: at)
            due[recall.recall] = at
            pending.append(recall)
        }
        for batch in stride(from: 0, to: pending.count, by: 500).map({ Array(pending[$0..<min($0 + 500, pending.count)]) }) {
            try await client.withTransaction(logger: logger) { connection in
                _ = try await connection.query(
                    """
                    INSERT INTO chats (id, user_id, title, status)
                    SELECT c, u, 'Newton''s laws', 'ended' FROM unnest(\(batch.map(\.chat))::uuid[], \(batch.map(\.user))::uuid[]) AS t (c, u)
                    """, logger: logger)
                _ = try await connection.query(
                    """
                    INSERT INTO recalls (id, user_id, chat_id, interval_seconds, target_at, due_at)
                    SELECT r, u, c, 86400, d, d FROM unnest(\(batch.map(\.recall))::uuid[], \(batch.map(\.user))::uuid[],
                                                          \(batch.map(\.chat))::uuid[], \(batch.map(\.due))::timestamptz[]) AS t (r, u, c, d)
                    """, logger: logger)
                for recall in batch {
                    try await RecallDelivery.enqueueDelivery(recallID: recall.recall, userID: recall.user, dueAt: recall.due, on: connection, logger: logger)
                }
            }
        }
        return due
    }
    let seeded = clock.now - seedStart
    let through = viaHub ? "; through Notification Hubs" : ""
    print(
        "push: seeded \(userCount) learners (\(devices) device\(devices == 1 ? "" : "s") each) and \(recallCount) recalls in \(format(seconds(seeded), 1)) s;"
            + " due from \(format(first.timeIntervalSinceNow, 1)) s from now over \(format(spread, 0)) s\(through)")
    if first.timeIntervalSinceNow < 0 { print("push: warning: seeding ended after the first due time; raise --start-in") }

    // The stand-in's lines: "<unix time> <service> <token tail> <deep link ...?recall=ID>"; the hub's
    // have its format as the service and the tag's tail. Either way one line per expected send: a
    // push per device, or a tag send per format (as many as the devices here).
    let expected = devices * recallCount
    var delays: [Double] = []
    var seen = Set<String>()
    var duplicates = 0
    var lastAccepted = 0.0
    // The hub's route: sends accepted per recall, the recalls all of whose sends were, and lines of
    // this run's recalls from another route (none unless the direct route's worker still runs).
    var sendsPerRecall: [UUID: Int] = [:]
    var recallsComplete = 0
    var otherRoute = 0
    var offset: UInt64 = 0
    var carry = ""
    let deadline = first.addingTimeInterval(spread + timeout)
    while delays.count < expected, Date() < deadline {
        try await Task.sleep(for: .milliseconds(500))
        guard let handle = FileHandle(forReadingAtPath: log) else { throw Failure("cannot read \(log)") }
        try handle.seek(toOffset: offset)
        let data = handle.readDataToEndOfFile()
        try handle.close()
        offset += UInt64(data.count)
        let text = carry + String(decoding: data, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        carry = String(lines.removeLast())
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 4, let at = Double(fields[0]), let query = fields[3].split(separator: "?recall=").last,
                let recall = UUID(uuidString: String(query)), let dueAt = due[recall]
            else { continue }
            if viaHub, !hubServices.contains(fields[1]) {
                otherRoute += 1
                continue
            }
            guard seen.insert("\(recall) \(fields[1]) \(fields[2])").inserted else {
                duplicates += 1
                continue
            }
            delays.append(at - dueAt.timeIntervalSince1970)
            lastAccepted = max(lastAccepted, at)
            if viaHub {
                sendsPerRecall[recall, default: 0] += 1
                if sendsPerRecall[recall] == hubServices.count { recallsComplete += 1 }
            }
        }
    }
    guard !delays.isEmpty else { throw Failure("no push of this run reached the stand-in within \(Int(timeout)) s after the last due time") }
    delays.sort()
    func percentile(_ p: Double) -> Double { delays[min(delays.count - 1, Int((Double(delays.count) * p).rounded(.up)) - 1)] }
    let window = max(lastAccepted - first.timeIntervalSince1970, 0.001)
    let rate = Double(delays.count) / window
    print(
        "push: \(delays.count) of \(expected) pushes accepted in \(format(window, 1)) s from the first due time: \(format(rate, 0)) deliveries/s;"
            + " due -> accepted p50 \(format(percentile(0.5), 2)) s, p95 \(format(percentile(0.95), 2)) s, p99 \(format(percentile(0.99), 2)) s;"
            + " \(duplicates) sent twice")
    if viaHub {
        let recallRate = Double(recallsComplete) / window
        let strays = otherRoute > 0 ? "; \(otherRoute) pushes of these recalls went the direct route" : ""
        print("push: \(recallsComplete) of \(recallCount) recalls had every tag send accepted: \(format(recallRate, 0)) recalls/s\(strays)")
        result("push_recalls_complete", recallsComplete)
        result("push_recalls_per_second", recallRate)
        result("push_other_route", otherRoute)
    }
    result("push_delivered", delays.count)
    result("push_missing", expected - delays.count)
    result("push_duplicates", duplicates)
    result("push_per_second", rate)
    result("push_delay_p50", percentile(0.5))
    result("push_delay_p95", percentile(0.95))
    result("push_delay_p99", percentile(0.99))
    // The last push's acceptance after the first due time: a window's opening is all due at once.
    result("push_last_seconds", window)
}

// MARK: - register: the app's registration on every launch, repeated

/// `count` consecutive `POST /api/v1/push/register` calls of one device's token against `server`,
/// as the app makes one on every launch: latency percentiles, and the rows it leaves (one token,
/// one device: repeating must not grow anything).
func benchRegister(_ options: Options) async throws {
    let count = try options.int("count", default: 1_000)
    let server = try options.string("server")
    let url = try DatabaseURL(parsing: try options.string("database"))
    let logger = benchLogger()
    let configuration = try TokenConfiguration(environment: ProcessInfo.processInfo.environment)
    let database = Database(configuration: url, perEventLoopOf: .singleton, timeout: .seconds(30), poolSize: 2, logger: logger)
    // push/register allows a learner 30 calls a minute (OperationTable): the calls are spread over
    // learners, 25 each, every learner registering its one token again and again.
    let perLearner = 25
    struct Caller { let user: UUID; let device: String; let access: String; let body: String }
    let callers: [Caller] = (0..<((count + perLearner - 1) / perLearner)).map { index in
        let user = UUID()
        let device = "bench-register-\(user.uuidString.prefix(8))"
        let token = String(repeating: "ab", count: 31) + String(format: "%02x", index % 256)
        let access = AccessTokens(
            keyRing: configuration.jwtKeys, issuer: configuration.jwtIssuer, audience: configuration.jwtAudience, lifetime: .seconds(3600)
        ).issue(userID: user, deviceID: device, familyID: UUID(), scopes: ["push:register"], tokenID: randomBase64URL(bytes: 16), issuedAt: Date())
        return Caller(user: user, device: device, access: access, body: #"{"token":"\#(token)","platform":"ios","device_id":"\#(device)"}"#)
    }

    let rows: (tokens: Int, devices: Int) = try await Commands.withDatabase(database) { client in
        // The users and the device rows their logins made.
        for caller in callers {
            _ = try await client.query(
                """
                INSERT INTO users (id, issuer, subject, display_name)
                VALUES (\(caller.user), 'urn:bff:bench', \("bench-register-" + caller.user.uuidString), 'Bench')
                """)
            _ = try await client.query("INSERT INTO devices (device_id, user_id, model) VALUES (\(caller.device), \(caller.user), 'iPhone15,2')")
        }
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        let clock = ContinuousClock()
        do {
            for call in 0..<count {
                let caller = callers[call / perLearner]
                var request = HTTPClientRequest(url: "\(server)/api/v1/push/register")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(caller.access)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: caller.body))
                let start = clock.now
                let response = try await http.execute(request, timeout: .seconds(10))
                _ = try await response.body.collect(upTo: 65536)
                latencies.append(seconds(clock.now - start) * 1000)
                guard response.status.code / 100 == 2 else { throw Failure("push/register answered \(response.status.code)") }
            }
        } catch {
            try await http.shutdown()
            throw error
        }
        try await http.shutdown()
        latencies.sort()
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)] }
        print(
            "register: \(count) calls, \(perLearner) by each of \(callers.count) learners re-registering one token: p50 \(format(percentile(0.5), 2)) ms,"
                + " p99 \(format(percentile(0.99), 2)) ms, max \(format(latencies.last!, 2)) ms")
        result("register_p50_ms", percentile(0.5))
        result("register_p99_ms", percentile(0.99))
        // The most rows any of them has: one token and one device each, however often it registered.
        var counts = (tokens: 0, devices: 0)
        for try await (tokens, devices) in try await client.query(
            """
            SELECT coalesce(max((SELECT count(*) FROM push_tokens t WHERE t.user_id = u)), 0)::int,
                   coalesce(max((SELECT count(*) FROM devices d WHERE d.user_id = u)), 0)::int
            FROM unnest(\(callers.map(\.user))::uuid[]) AS u
            """
        ).decode((Int, Int).self) { counts = (tokens, devices) }
        return counts
    }
    print("register: afterwards each learner has at most \(rows.tokens) token row(s) and \(rows.devices) device row(s)")
    result("register_token_rows", rows.tokens)
    result("register_device_rows", rows.devices)
}
