import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Rate limiter", .needsDatabase, .timeLimit(.minutes(3)))
struct RateLimiterTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    // A period of ten minutes: with 5 per 10 s a slot refills every 2 s, and a loaded CI machine once
    // spread the 50 decisions over more than that (6 passed, correctly).
    @Test("exactly 5 of 50 concurrent requests pass a 5-per-10-minutes limit shared by two replicas")
    func exactAcrossReplicas() async throws {
        let decisions = try await database.withClient(poolSize: 10) { [database] replicaA in
            try await database.withClient(poolSize: 10) { replicaB in
                let limiters = [RateLimiter(database: Database(client: replicaA)), RateLimiter(database: Database(client: replicaB))]
                return try await withThrowingTaskGroup(of: RateLimiter.Decision.self) { group in
                    for index in 0..<50 {
                        group.addTask {
                            try await limiters[index % 2].limit(key: "chat:user-1", rate: 5, per: .seconds(600))
                        }
                    }
                    var all: [RateLimiter.Decision] = []
                    for try await decision in group { all.append(decision) }
                    return all
                }
            }
        }
        #expect(decisions.count == 50)
        #expect(decisions.filter(\.allowed).count == 5)
        let rejected = decisions.filter { !$0.allowed }
        // The next slot is at most one interval (120 s) away: each decision reads the clock once it
        // holds the key's row (migration 0007), so waiting behind the others adds nothing.
        #expect(rejected.allSatisfy { $0.retryAfter > 0 && $0.retryAfter <= 120 && $0.remaining == 0 }, "\(rejected.map(\.retryAfter))")
    }

    @Test("a decision that waited for the key's row is taken when it runs: Retry-After counts from then, not from its arrival")
    func clockReadAfterTheWait() async throws {
        let key = "k:waited"
        try await database.withClient(poolSize: 3) { client in
            let limiter = RateLimiter(database: Database(client: client))
            // 2 per 10 s: a slot every 5 s, both free now. This takes the first.
            _ = try await limiter.limit(key: key, rate: 2, per: .seconds(10))
            let firstDecided = ContinuousClock.now
            let logger = TestEnvironment.quietLogger
            let (waiting, bound) = try await client.withTransaction(logger: logger) { holder in
                _ = try await holder.query("SELECT 1 FROM rate_limits WHERE key = \(key) FOR UPDATE", logger: logger)
                let waiting = Task { try await limiter.limit(key: key, rate: 2, per: .seconds(10)) }
                try await Task.sleep(for: .seconds(1))
                // While that decision waits for the row, this one takes the second slot.
                _ = try await holder.query("SELECT allowed FROM bff_rate_limit_take(\(key), 2, 10)", logger: logger)
                // The next slot opens 5 s after the first decision, and the waiting one runs after
                // this transaction ends; read at its arrival, the clock made Retry-After ~1 s longer.
                return (waiting, 5 - (ContinuousClock.now - firstDecided).seconds)
            }
            let decision = try await waiting.value
            #expect(!decision.allowed)
            #expect(decision.retryAfter > 0 && decision.retryAfter <= bound, "\(decision.retryAfter) > \(bound)")
        }
    }

    @Test("remaining counts down, other keys are independent, and the quota refills at rate/period")
    func remainingAndRefill() async throws {
        // A long period keeps the first part independent of how slowly a loaded machine runs it.
        let (first, third, fourth, other, afterWait) = try await database.withClient(poolSize: 2) { client in
            let limiter = RateLimiter(database: Database(client: client))
            let first = try await limiter.limit(key: "k:count", rate: 3, per: .seconds(60))
            _ = try await limiter.limit(key: "k:count", rate: 3, per: .seconds(60))
            let third = try await limiter.limit(key: "k:count", rate: 3, per: .seconds(60))
            let fourth = try await limiter.limit(key: "k:count", rate: 3, per: .seconds(60))
            let other = try await limiter.limit(key: "k:other", rate: 3, per: .seconds(60))
            _ = try await limiter.limit(key: "k:refill", rate: 2, per: .seconds(1))
            _ = try await limiter.limit(key: "k:refill", rate: 2, per: .seconds(1))
            try await Task.sleep(for: .milliseconds(600))
            let afterWait = try await limiter.limit(key: "k:refill", rate: 2, per: .seconds(1))
            return (first, third, fourth, other, afterWait)
        }
        #expect(first.allowed && first.remaining == 2)
        #expect(third.allowed && third.remaining == 0)
        #expect(!fourth.allowed)
        #expect(fourth.retryAfter > 0 && fourth.retryAfter <= 20)
        #expect(other.allowed && other.remaining == 2)
        #expect(afterWait.allowed)
    }

    @Test("/api/v1/auth/* but refresh and the back-channel logout is limited per client address: 429 rate_limited with Retry-After and RateLimit-* headers")
    func authMiddleware() async throws {
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "3"])
        try await app.live { client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<3 {
                let response = try await client.execute(uri: "/api/v1/auth/start?device_id=device-0001&redirect_uri=com.example.app:/oauth/callback", method: .get)
                statuses.append(response.status)
                #expect(response.headers[.rateLimitLimit] == "3")
            }
            #expect(!statuses.contains(.tooManyRequests))
            let limited = try await client.execute(uri: "/api/v1/auth/start?device_id=device-0001&redirect_uri=x", method: .get)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.errorCode == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(limited.headers[.rateLimitRemaining] == "0")
            #expect(Int(limited.headers[.rateLimitReset] ?? "") ?? 0 >= 1)
            // The router skips empty segments; the limiter must see these as the same routes.
            for uri in ["//api/v1/auth/start?device_id=device-0001&redirect_uri=x", "/api/v1//auth/start/?device_id=device-0001"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .tooManyRequests, "\(uri)")
            }
            // Refresh is not counted per address (many learners behind one school's address).
            let refresh = try await client.execute(
                uri: "/api//v1/auth/refresh", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}"))
            #expect(refresh.status == .unprocessableContent && refresh.headers[.rateLimitLimit] == nil, "\(refresh.text)")
            // Routes outside /auth/ are not counted against it.
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok)
            // Nor are back-channel logouts: they come from the IdP's few addresses, for every user,
            // and one refused is a session that stays signed in.
            for uri in ["/api/v1/auth/backchannel-logout", "//api/v1/auth/backchannel-logout/"] {
                let logout = try await client.execute(
                    uri: uri, method: .post, headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: "logout_token=x"))
                #expect(logout.status == .badRequest && logout.errorCode == "invalid_logout_token", "\(uri): \(logout.text)")
                #expect(logout.headers[.rateLimitLimit] == nil)
            }
            #expect(health.headers[.rateLimitLimit] == nil)
        }
    }

    @Test("behind a trusted proxy each forwarded client has its own login budget; from an untrusted peer X-Forwarded-For is ignored and all share the peer's")
    func trustedProxiesOverHTTP() async throws {
        func statuses(trusting proxies: String?) async throws -> [String: [HTTPResponse.Status]] {
            var environment = ["BFF_AUTH_RATE_LIMIT": "2", "BFF_OIDC_ISSUER": "http://127.0.0.1:9"]
            if let proxies { environment["BFF_TRUSTED_PROXIES"] = proxies }
            let app = try await makeTestApp(database: try await TestDatabases.shared.makeMigrated(), environment: environment)
            return try await app.live { client in
                var seen: [String: [HTTPResponse.Status]] = [:]
                for forwarded in ["203.0.113.7", "203.0.113.7", "203.0.113.7", "198.51.100.4"] {
                    let response = try await client.execute(
                        uri: "/api/v1/auth/start?device_id=proxy-device-1&redirect_uri=x", method: .get, headers: [.xForwardedFor: forwarded])
                    seen[forwarded, default: []].append(response.status)
                }
                return seen
            }
        }
        // Trusted: 203.0.113.7 spends its own two and is refused; 198.51.100.4 is untouched.
        let trusted = try await statuses(trusting: "127.0.0.1, ::1")
        #expect(trusted["203.0.113.7"]?.map { $0 == .tooManyRequests } == [false, false, true])
        #expect(trusted["198.51.100.4"]?.contains(.tooManyRequests) == false)
        // Untrusted: the header is the client's own word; every request counts against the peer.
        let untrusted = try await statuses(trusting: nil)
        #expect(untrusted["198.51.100.4"] == [.tooManyRequests])
    }

    @Test("requests carrying X-Forwarded-For from a peer that is no trusted proxy are warned of once a minute at most; from a trusted proxy, not at all")
    func untrustedForwardingWarned() async throws {
        func warnings(trusting proxies: String?) async throws -> [[String: Any]] {
            let logs = LogCapture()
            let app = try await makeTestApp(
                database: database, environment: proxies.map { ["BFF_TRUSTED_PROXIES": $0] } ?? [:], logs: logs)
            try await app.live { client in
                for _ in 0..<3 {
                    let response = try await client.execute(uri: "/healthz", method: .get, headers: [.xForwardedFor: "203.0.113.7"])
                    #expect(response.status == .ok)
                }
            }
            return logs.entries().filter { $0["event"] as? String == "untrusted_forwarded_for" }
        }
        let untrusted = try await warnings(trusting: nil)
        #expect(untrusted.count == 1)
        #expect(untrusted.first?["level"] as? String == "warning" && ["127.0.0.1", "::1"].contains(untrusted.first?["peer"] as? String ?? ""))
        #expect((untrusted.first?["msg"] as? String)?.contains("BFF_TRUSTED_PROXIES") == true)
        #expect(try await warnings(trusting: "127.0.0.1, ::1").isEmpty)
    }

    @Test("housekeeping deletes a backlog of restored keys over several batches and keeps the keys still counting")
    func purgeBacklog() async throws {
        let (left, live) = try await database.withClient(poolSize: 2) { client in
            _ = try await client.query(
                """
                INSERT INTO rate_limits (key, tat)
                SELECT 'purge:old:' || n, now() - make_interval(secs => n) FROM generate_series(1, 12001) n
                UNION ALL SELECT 'purge:live:' || n, now() + interval '1 minute' FROM generate_series(1, 3) n
                """)
            try await RateLimiter(database: Database(client: client)).purgeExpired()
            var counts: [Int] = []
            for prefix in ["purge:old:%", "purge:live:%"] {
                for try await count in try await client.query("SELECT count(*)::int FROM rate_limits WHERE key LIKE \(prefix)").decode(Int.self) {
                    counts.append(count)
                }
            }
            return (counts[0], counts[1])
        }
        #expect(left == 0)
        #expect(live == 3)
    }

    @Test("client addresses come from X-Forwarded-For only behind a trusted proxy")
    func trustedProxies() throws {
        let network = try #require(IPNetwork("10.0.0.0/8"))
        #expect(network.contains("10.1.2.3"))
        #expect(!network.contains("11.1.2.3"))
        #expect(IPNetwork("::1")?.contains("::1") == true)
        #expect(IPNetwork("300.1.1.1") == nil)
        #expect(IPNetwork("10.0.0.0/33") == nil)
        #expect(network.contains("::ffff:10.1.2.3"))
        #expect(IPNetwork("::ffff:10.0.0.0/104")?.contains("10.1.2.3") == true)
        #expect(IPNetwork("::ffff:10.0.0.0/104")?.contains("11.1.2.3") == false)
        #expect(IPNetwork("::ffff:10.0.0.0/64") == nil)
    }

    @Test("the limit's key: the peer, or the right-most untrusted forwarded hop; IPv6 by its /64, IPv4-mapped as IPv4")
    func clientKeys() throws {
        let addresses = ClientAddress(trustedProxies: [try #require(IPNetwork("10.0.0.0/8"))])
        #expect(addresses.key(peer: "203.0.113.9", forwardedFor: "198.51.100.1") == "203.0.113.9")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "198.51.100.1, 203.0.113.7, 10.0.0.3") == "203.0.113.7")
        #expect(addresses.key(peer: "::ffff:10.0.0.2", forwardedFor: "203.0.113.7") == "203.0.113.7")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "not-an-address") == "10.0.0.2")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: nil) == "10.0.0.2")
        #expect(addresses.key(peer: "::ffff:198.51.100.4", forwardedFor: nil) == "198.51.100.4")
        let one = addresses.key(peer: "2001:db8:1:2::1", forwardedFor: nil)
        #expect(one == "2001:db8:1:2::/64")
        #expect(addresses.key(peer: "2001:db8:1:2:ffff:ee:dd:cc", forwardedFor: nil) == one)
        #expect(addresses.key(peer: "2001:db8:1:3::1", forwardedFor: nil) != one)
        #expect(addresses.key(peer: nil, forwardedFor: "203.0.113.7") == "unknown")
    }

    @Test("a forwarded hop with the client's port counts as its address; anything else with a colon ends the chain")
    func forwardedHopsWithPorts() throws {
        let addresses = ClientAddress(trustedProxies: [try #require(IPNetwork("10.0.0.0/8"))])
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "198.51.100.1, 203.0.113.7:4711") == "203.0.113.7")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "203.0.113.7, 10.0.0.3:443") == "203.0.113.7")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "[2001:db8:1:2::1]:4711") == "2001:db8:1:2::/64")
        #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "[2001:db8:1:2::1]") == "2001:db8:1:2::/64")
        for malformed in [
            "203.0.113.7:", "203.0.113.7:123456", "203.0.113.7:80:80", "203.0.113.7:http", "[203.0.113.7]:80",
            "[2001:db8::1", "[2001:db8::1]80", "[2001:db8::1]:", "host.example:80", ":80",
        ] {
            #expect(addresses.key(peer: "10.0.0.2", forwardedFor: "198.51.100.1, \(malformed)") == "10.0.0.2", "\(malformed)")
        }
    }
}
