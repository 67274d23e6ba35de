import AsyncHTTPClient
import BFF
import BFFPlatform
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

// MARK: - iap: RevenueCat's webhooks against the running server and worker

/// One seeded learner's only subscription at revenuecat-stand-in, and so the entitlement their
/// re-syncs must end with.
private struct Customer: Sendable {
    let user: UUID
    let product: String
    let unsubscribed: Bool
    let plan: String
    let status: String
}

/// One delivery's answer: the learner its event names, how long it took, its status code (0: no
/// answer) and the inbox's verdict.
private struct Answer: Sendable {
    let customer: Int
    let milliseconds: Double
    let endedAt: Double
    let code: Int
    let verdict: String?
}

/// Every delivery's answer, and when the first was sent.
private struct Delivered: Sendable {
    let answers: [Answer]
    let startedAt: Double

    var lastAnswer: Double { answers.map(\.endedAt).max() ?? startedAt }
}

/// The event types RevenueCat sends about a subscription's life, taken in turn. The BFF acts on none
/// as such (every one only asks for a re-sync), so their mix changes nothing but the bodies.
private let eventTypes = ["INITIAL_PURCHASE", "RENEWAL", "CANCELLATION", "BILLING_ISSUE", "PRODUCT_CHANGE"]

/// Seeds `users` learners with a subscription each at revenuecat-stand-in (`--revenuecat`, its
/// control endpoints): a third Basic, a third Pro, a third Pro with auto-renew turned off. Then
/// posts `events` distinct webhook events about them plus `duplicates` repeats of some (RevenueCat
/// delivers at least once), shuffled, over `concurrency` connections, and waits until every
/// learner's entitlement is what their subscription grants and no event waits for a re-sync. Last,
/// it reads the stand-in's log of `GET /subscribers` calls: the coalescing must make one re-sync
/// per learner and 10-second window, however many events name them.
func benchIAP(_ options: Options) async throws {
    let userCount = try options.int("users", default: 1_000)
    let eventCount = try options.int("events", default: 7_000)
    let duplicateCount = try options.int("duplicates", default: 3_000, allowZero: true)
    let concurrency = try options.int("concurrency", default: 32)
    let timeout = Double(try options.int("timeout", default: 120))
    let server = try options.string("server")
    let control = try options.string("revenuecat")
    let url = try DatabaseURL(parsing: try options.string("database"))
    guard duplicateCount <= eventCount else { throw Failure("--duplicates must not exceed --events") }
    let environment = ProcessInfo.processInfo.environment
    guard let authorization = environment["BFF_REVENUECAT_WEBHOOK_AUTH"] else { throw Failure("BFF_REVENUECAT_WEBHOOK_AUTH is not set") }
    let products = try planProducts(environment["BFF_IAP_PRODUCTS"] ?? "")

    let customers = (0..<userCount).map { index -> Customer in
        let user = UUID()
        switch index % 3 {
        case 0: return Customer(user: user, product: products.basic, unsubscribed: false, plan: "basic", status: "active")
        case 1: return Customer(user: user, product: products.pro, unsubscribed: false, plan: "pro", status: "active")
        default: return Customer(user: user, product: products.pro, unsubscribed: true, plan: "pro", status: "canceled")
        }
    }
    var pool = HTTPClient.Configuration()
    pool.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)
    pool.timeout = .init(connect: .seconds(10), read: .seconds(30))
    let http = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: pool)
    let database = Database(configuration: url, perEventLoopOf: .singleton, timeout: .seconds(30), poolSize: 2, logger: benchLogger())
    do {
        let delivered = try await Commands.withDatabase(database) { client in
            try await seed(customers, client: client, http: http, control: control)
            let deliveries = webhookBodies(customers, events: eventCount, duplicates: duplicateCount)
            print(
                "iap: seeded \(userCount) learners (a third each Basic, Pro, Pro canceled); \(deliveries.count) deliveries:"
                    + " \(eventCount) events and \(duplicateCount) repeats, shuffled, over \(concurrency) connections")
            let delivered = try await deliver(deliveries, http: http, server: server, authorization: authorization, concurrency: concurrency)
            report(delivered, expectedStored: eventCount, expectedDuplicates: duplicateCount)
            try await awaitConvergence(customers, client: client, delivered: delivered, timeout: timeout)
            try await reportSyncJobs(client: client)
            return delivered
        }
        try await reportCalls(customers, http: http, control: control, delivered: delivered, events: eventCount)
    } catch {
        try await http.shutdown()
        throw error
    }
    try await http.shutdown()
}

/// The first product `BFF_IAP_PRODUCTS` lists for each paid plan: the stand-in's subscriptions must
/// name products the server maps, or every learner would stay free.
private func planProducts(_ list: String) throws -> (basic: String, pro: String) {
    var byPlan: [String: String] = [:]
    for entry in list.split(separator: ",") {
        let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        if parts.count == 2, byPlan[parts[1]] == nil { byPlan[parts[1]] = parts[0] }
    }
    guard let basic = byPlan["basic"], let pro = byPlan["pro"] else { throw Failure("BFF_IAP_PRODUCTS must list a basic and a pro product, got '\(list)'") }
    return (basic, pro)
}

/// The learners' rows (webhooks name users by their BFF id), and each one's subscription at the
/// stand-in, 16 control calls at a time.
private func seed(_ customers: [Customer], client: PostgresClient, http: HTTPClient, control: String) async throws {
    let users = customers.map(\.user)
    _ = try await client.query(
        """
        INSERT INTO users (id, issuer, subject, display_name)
        SELECT u, 'urn:bff:bench', 'bench-iap-' || u, 'Bench learner' FROM unnest(\(users)::uuid[]) AS u
        """)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for lane in 0..<16 {
            group.addTask {
                for customer in stride(from: lane, to: customers.count, by: 16).map({ customers[$0] }) {
                    var request = HTTPClientRequest(url: "\(control)/_control/customers/\(customer.user.uuidString.lowercased())")
                    request.method = .PUT
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(
                        ByteBuffer(
                            string: #"{"product_id":"\#(customer.product)","store":"app_store","expires_in_seconds":2592000,"unsubscribed":\#(customer.unsubscribed),"refunded":false}"#
                        ))
                    let response = try await http.execute(request, timeout: .seconds(10))
                    _ = try await response.body.collect(upTo: 65_536)
                    guard response.status.code / 100 == 2 else { throw Failure("the stand-in's control endpoint answered \(response.status.code)") }
                }
            }
        }
        try await group.waitForAll()
    }
}

/// `events` distinct events, the learners named in turn and the types in turn, then `duplicates`
/// of them again with the same body (a retry repeats the delivery as it was), all shuffled; each
/// with the index of the learner it names.
private func webhookBodies(_ customers: [Customer], events: Int, duplicates: Int) -> [(body: String, customer: Int)] {
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    let bodies = (0..<events).map { index -> (body: String, customer: Int) in
        let customer = customers[index % customers.count]
        let user = customer.user.uuidString.lowercased()
        let type = eventTypes[index % eventTypes.count]
        let transaction = 2_000_000_000_000 + index
        let body =
            #"{"api_version":"1.0","event":{"id":"\#(UUID().uuidString)","type":"\#(type)","app_user_id":"\#(user)","#
            + #""original_app_user_id":"\#(user)","aliases":["\#(user)"],"product_id":"\#(customer.product)","period_type":"NORMAL","#
            + #""purchased_at_ms":\#(now - 86_400_000),"expiration_at_ms":\#(now + 2_592_000_000),"environment":"PRODUCTION","#
            + #""store":"APP_STORE","transaction_id":"\#(transaction)","original_transaction_id":"\#(transaction)","#
            + #""event_timestamp_ms":\#(now - Int64(events - index))}}"#
        return (body, index % customers.count)
    }
    return (bodies + bodies.shuffled().prefix(duplicates)).shuffled()
}

/// Posts every body once, `concurrency` at a time (each lane one connection, deliveries taken in
/// turn), and times each answer from the request's start to the body's end.
private func deliver(_ bodies: [(body: String, customer: Int)], http: HTTPClient, server: String, authorization: String, concurrency: Int) async throws -> Delivered {
    struct Receipt: Decodable { let status: String }
    let clock = ContinuousClock()
    let startedAt = Date().timeIntervalSince1970
    let answers = try await withThrowingTaskGroup(of: [Answer].self) { group in
        for lane in 0..<concurrency {
            group.addTask {
                var answers: [Answer] = []
                for index in stride(from: lane, to: bodies.count, by: concurrency) {
                    var request = HTTPClientRequest(url: "\(server)/api/v1/iap/revenuecat/webhook")
                    request.method = .POST
                    request.headers.add(name: "Authorization", value: authorization)
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(string: bodies[index].body))
                    let start = clock.now
                    // A delivery without an answer counts as one, as RevenueCat would retry it.
                    do {
                        let response = try await http.execute(request, timeout: .seconds(60))
                        let body = try await response.body.collect(upTo: 65_536)
                        let verdict = response.status.code == 200 ? (try? JSONDecoder().decode(Receipt.self, from: Data(buffer: body)))?.status : nil
                        if response.status.code != 200, answers.allSatisfy({ $0.code == 200 }) {
                            print("iap: a delivery answered \(response.status.code): \(String(buffer: body).prefix(300))")
                        }
                        answers.append(
                            Answer(
                                customer: bodies[index].customer, milliseconds: seconds(clock.now - start) * 1000, endedAt: Date().timeIntervalSince1970, code: Int(response.status.code),
                                verdict: verdict))
                    } catch {
                        print("iap: a delivery failed: \(error)")
                        answers.append(Answer(customer: bodies[index].customer, milliseconds: seconds(clock.now - start) * 1000, endedAt: Date().timeIntervalSince1970, code: 0, verdict: nil))
                    }
                }
                return answers
            }
        }
        var all: [Answer] = []
        for try await lane in group { all += lane }
        return all
    }
    return Delivered(answers: answers, startedAt: startedAt)
}

/// Deliveries per second and the answer's percentiles; the inbox's verdicts against what was sent.
private func report(_ delivered: Delivered, expectedStored: Int, expectedDuplicates: Int) {
    let answers = delivered.answers
    let latencies = answers.map(\.milliseconds).sorted()
    func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, max(0, Int((Double(latencies.count) * p).rounded(.up)) - 1))] }
    let window = max(delivered.lastAnswer - delivered.startedAt, 0.001)
    let rate = Double(answers.count) / window
    let stored = answers.filter { $0.verdict == "stored" }.count
    let duplicates = answers.filter { $0.verdict == "duplicate" }.count
    let failed = answers.filter { $0.code != 200 }.count
    print(
        "iap: \(answers.count) deliveries in \(format(window, 2)) s: \(format(rate, 0)) deliveries/s; answer p50 \(format(percentile(0.5), 2)) ms,"
            + " p99 \(format(percentile(0.99), 2)) ms, max \(format(latencies.last ?? 0, 2)) ms; \(stored) stored (of \(expectedStored)),"
            + " \(duplicates) duplicate (of \(expectedDuplicates)), \(failed) not 200")
    result("iap_deliveries_per_second", rate)
    result("iap_answer_p50_ms", percentile(0.5))
    result("iap_answer_p99_ms", percentile(0.99))
    result("iap_answer_max_ms", latencies.last ?? 0)
    result("iap_stored", stored)
    result("iap_duplicate", duplicates)
    result("iap_not_200", failed)
}

/// Polls until every learner's entitlement has the plan and status their subscription grants and no
/// event waits for a re-sync (every user it names asked RevenueCat after it came; the expiry job marks
/// such events processed later), or `timeout` seconds after the last answer. The convergence instant
/// is the last re-sync's claim (`entitlements.synced_at`, PostgreSQL's clock, this machine's): it
/// read the final state, so every entitlement was right moments after.
private func awaitConvergence(_ customers: [Customer], client: PostgresClient, delivered: Delivered, timeout: Double) async throws {
    let users = customers.map(\.user)
    let plans = customers.map(\.plan)
    let statuses = customers.map(\.status)
    let lastAnswer = delivered.lastAnswer
    let deadline = lastAnswer + timeout
    var state = (right: 0, waiting: 0, lastProcessed: nil as Double?)
    while true {
        for try await row in try await client.query(
            """
            SELECT (SELECT count(*) FROM unnest(\(users)::uuid[], \(plans)::text[], \(statuses)::text[]) AS e (u, p, s)
                    JOIN entitlements t ON t.user_id = e.u AND t.plan = e.p AND t.status = e.s)::int,
                   (SELECT count(*) FROM revenuecat_events ev WHERE ev.processed_at IS NULL AND EXISTS (
                        SELECT 1 FROM unnest(ev.pending_users) AS p(u)
                        WHERE NOT EXISTS (SELECT 1 FROM entitlements e WHERE e.user_id = p.u AND e.synced_at >= ev.received_at)))::int,
                   (SELECT extract(epoch FROM max(synced_at)) FROM entitlements WHERE user_id = ANY(\(users)::uuid[]))::float8
            """
        ).decode((Int, Int, Double?).self) { state = (row.0, row.1, row.2) }
        if state.right == customers.count && state.waiting == 0 { break }
        guard Date().timeIntervalSince1970 < deadline else {
            print("iap: not converged \(format(timeout, 0)) s after the last answer: \(state.right) of \(customers.count) entitlements right, \(state.waiting) events waiting")
            for try await (plan, status, count) in try await client.query(
                """
                SELECT coalesce(t.plan, '(none)') || ' instead of ' || e.p, coalesce(t.status, '(none)') || ' instead of ' || e.s, count(*)::int
                FROM unnest(\(users)::uuid[], \(plans)::text[], \(statuses)::text[]) AS e (u, p, s) LEFT JOIN entitlements t ON t.user_id = e.u
                WHERE t.plan IS DISTINCT FROM e.p OR t.status IS DISTINCT FROM e.s GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 5
                """
            ).decode((String, String, Int).self) { print("iap:   \(count) learners: plan \(plan), status \(status)") }
            result("iap_converged", 0)
            return
        }
        try await Task.sleep(for: .milliseconds(100))
    }
    let seen = Date().timeIntervalSince1970
    let converged = state.lastProcessed ?? seen
    print(
        "iap: converged (every entitlement right, no event waiting) \(format(converged - delivered.startedAt, 2)) s after the first delivery,"
            + " \(format(converged - lastAnswer, 2)) s after the last answer (seen by polling \(format(seen - lastAnswer, 2)) s after it)")
    result("iap_converged", 1)
    result("iap_converged_after_first_s", converged - delivered.startedAt)
    result("iap_converged_after_last_s", converged - lastAnswer)
}

/// The re-sync jobs as the queue kept them: how long after their run time a worker took them, and
/// how many ran after the window their unique key names (`sync:<user>:<floor(epoch/10)>`) had ended,
/// which lets the next window's job call RevenueCat in the same window.
private func reportSyncJobs(client: PostgresClient) async throws {
    for try await (jobs, late, retried, p50, p99, most) in try await client.query(
        """
        SELECT count(*)::int,
               count(*) FILTER (WHERE floor(extract(epoch FROM attempted_at) / 10)::bigint > split_part(unique_key, ':', 3)::bigint)::int,
               count(*) FILTER (WHERE attempt > 1)::int,
               coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at)), 0)::float8,
               coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM attempted_at - run_at)), 0)::float8,
               coalesce(max(extract(epoch FROM attempted_at - run_at)), 0)::float8
        FROM jobs WHERE kind = 'iap.sync' AND unique_key LIKE 'sync:%' AND attempted_at IS NOT NULL
        """
    ).decode((Int, Int, Int, Double, Double, Double).self) {
        print(
            "iap: \(jobs) re-sync jobs, taken \(format(p50 * 1000, 0)) ms after their run time at p50, \(format(p99 * 1000, 0)) ms at p99,"
                + " \(format(most * 1000, 0)) ms at most; \(late) taken after their window had ended, \(retried) tried more than once")
        result("iap_sync_jobs", jobs)
        result("iap_sync_jobs_after_window", late)
        result("iap_sync_lag_p50_ms", p50 * 1000)
        result("iap_sync_lag_p99_ms", p99 * 1000)
    }
}

/// The stand-in's `GET /subscribers` calls per learner: in all, per event, and the most for one
/// learner in one 10-second window, aligned to epoch/10 as the coalescing's windows are, and sliding.
/// Also against the floor coalescing can reach: one call per learner and window in which an event
/// naming them was stored (by the time its answer came).
private func reportCalls(_ customers: [Customer], http: HTTPClient, control: String, delivered: Delivered, events: Int) async throws {
    let response = try await http.execute(HTTPClientRequest(url: "\(control)/_control/calls"), timeout: .seconds(10))
    let body = try await response.body.collect(upTo: 64 << 20)
    guard response.status.code == 200, let calls = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: [Double]] else {
        throw Failure("the stand-in's /_control/calls answered \(response.status.code)")
    }
    var windowsWithEvents = Set<[Int]>()
    for answer in delivered.answers where answer.verdict == "stored" {
        windowsWithEvents.insert([answer.customer, window(answer.endedAt)])
    }
    let deliveries = delivered.answers.count
    var total = 0
    var unsynced = 0
    var alignedMax = 0
    var slidingMax = 0
    // Aligned windows with more than one call, and how far into the window the first came: a job
    // asked for near a window's end and run after it shares its window with the next window's job.
    var crowded = 0
    var crowdedEarly = 0
    for customer in customers {
        let times = (calls[customer.user.uuidString.lowercased()] ?? []).sorted()
        total += times.count
        if times.isEmpty { unsynced += 1 }
        for group in Dictionary(grouping: times, by: window).values {
            alignedMax = max(alignedMax, group.count)
            guard group.count > 1, let first = group.first else { continue }
            crowded += 1
            if first - Double(window(first)) * 10 < 1 { crowdedEarly += 1 }
        }
        slidingMax = max(slidingMax, mostWithinTenSeconds(times))
    }
    print(
        "iap: \(total) RevenueCat calls for \(customers.count) learners (\(format(Double(total) / Double(customers.count), 2)) each, \(unsynced) never synced):"
            + " \(format(Double(total) / Double(events), 3)) per event, \(format(Double(total) / Double(deliveries), 3)) per delivery;"
            + " \(windowsWithEvents.count) learner-windows with events, \(format(Double(total) / Double(max(windowsWithEvents.count, 1)), 2)) calls each")
    print(
        "iap: at most \(alignedMax) calls for one learner in one aligned 10 s window, \(slidingMax) in any 10 s; \(crowded) aligned windows had"
            + " more than one, \(crowdedEarly) of them with the first call in the window's first second")
    result("iap_calls", total)
    result("iap_calls_per_event", Double(total) / Double(events))
    result("iap_calls_max_per_window", alignedMax)
    result("iap_calls_max_per_sliding_window", slidingMax)
    result("iap_crowded_windows", crowded)
    result("iap_users_never_synced", unsynced)
    result("iap_calls_per_event_window", Double(total) / Double(max(windowsWithEvents.count, 1)))
}

/// The coalescing's window of a unix time: floor(epoch / 10).
private func window(_ time: Double) -> Int { Int((time / 10).rounded(.down)) }

/// The most of `times` (sorted) within any 10 seconds.
private func mostWithinTenSeconds(_ times: [Double]) -> Int {
    var most = 0
    var first = 0
    for (last, time) in times.enumerated() {
        while time - times[first] >= 10 { first += 1 }
        most = max(most, last - first + 1)
    }
    return most
}
