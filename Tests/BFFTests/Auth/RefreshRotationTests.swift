import BFFWire
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Refresh rotation", .needsDatabase, .timeLimit(.minutes(3)))
struct RefreshRotationTests {
    let database: DatabaseURL
    /// The one learner of a test: one device is one account's (a second account signing in there
    /// would end the first one's sessions).
    let user = UUID()
    static let device = "device-rot-1"

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private var environment: [String: String] {
        TestEnvironment.serverEnvironment(database: database, ["BFF_AUTH_RATE_LIMIT": "10000", "BFF_LOG_LEVEL": "critical"])
    }

    private func login() async throws -> Commands.IssuedPair {
        try await Commands.issueToken(environment: environment, userID: user, deviceID: Self.device, scopes: AccessTokens.allScopes)
    }

    private static func body(_ token: String, device: String = device) -> ByteBuffer {
        ByteBuffer(string: #"{"refresh_token":"\#(token)","device_id":"\#(device)"}"#)
    }

    private static let json: HTTPFields = [.contentType: "application/json"]

    @Test("a valid token rotates once; a retry within the interval gets the identical pair; the new pair works")
    func rotationAndRetry() async throws {
        let pair = try await login()
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            let first = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(first.status == .ok, "\(first.text)")
            #expect(first.headers[.cacheControl] == "no-store")
            let retry = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(retry.status == .ok)
            #expect(retry.json["refresh_token"] as? String == first.json["refresh_token"] as? String)
            #expect(retry.json["access_token"] as? String == first.json["access_token"] as? String)
            #expect(first.json["refresh_token"] as? String != pair.refreshToken)
            #expect(first.json["token_type"] as? String == "Bearer")
            let child = try #require(first.json["refresh_token"] as? String)
            let next = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(child))
            #expect(next.status == .ok)
            let access = try #require(next.json["access_token"] as? String)
            let me = try await client.me(access)
            #expect(me.status == .ok)
        }
    }

    @Test("a family issued narrower keeps its scopes through rotations and a retry; one issued with every scope keeps every scope")
    func scopesSurviveRotation() async throws {
        /// The `scope` claim of an AppJWT (its signature is checked by the requests below).
        @Sendable func scope(of response: TestResponse) throws -> String? {
            let token = try #require(response.json["access_token"] as? String)
            let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
            return try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])["scope"] as? String
        }
        let narrow = try await Commands.issueToken(
            environment: environment, userID: user, deviceID: Self.device, scopes: ["chat:rw", "profile:read", "chat:rw"])
        let full = try await Commands.issueToken(
            environment: environment, userID: user, deviceID: Self.device, scopes: AccessTokens.allScopes.reversed())
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            func refresh(_ token: String) async throws -> TestResponse {
                let response = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(token))
                #expect(response.status == .ok, "\(response.text)")
                return response
            }
            let first = try await refresh(narrow.refreshToken)
            #expect(try scope(of: first) == "profile:read chat:rw")
            #expect(try scope(of: try await refresh(narrow.refreshToken)) == "profile:read chat:rw")
            let second = try await refresh(try #require(first.json["refresh_token"] as? String))
            #expect(try scope(of: second) == "profile:read chat:rw")
            let access = try #require(second.json["access_token"] as? String)
            #expect(try await client.me(access).status == .ok)
            let push = try await client.execute(
                uri: "/api/v1/push/register", method: .post,
                headers: [.authorization: "Bearer \(access)", .contentType: "application/json"], body: ByteBuffer(string: "{}"))
            #expect(push.status == .forbidden && push.errorCode == "insufficient_scope", "\(push.text)")

            #expect(try scope(of: try await refresh(full.refreshToken)) == AccessTokens.allScopes.joined(separator: " "))
        }
    }

    @Test("bff auth issue-token refuses no scope at all, and a database whose schema is behind this build")
    func issueTokenRefusals() async throws {
        let none = await #expect(throws: ConfigurationError.self) {
            try await Commands.issueToken(environment: environment, userID: user, deviceID: Self.device, scopes: [])
        }
        #expect(none?.variable == "--scope")
        let behind = try await TestDatabases.shared.makeEmpty()
        await #expect(throws: MigrationError.self) {
            try await Commands.issueToken(
                environment: TestEnvironment.serverEnvironment(database: behind, ["BFF_LOG_LEVEL": "critical"]),
                userID: user, deviceID: Self.device, scopes: AccessTokens.allScopes)
        }
    }

    @Test("during a key rotation a retry that reaches the other ring gets the same pair, in both directions")
    func retryAcrossKeyRings() async throws {
        let k1 = "k1:" + Base64URL.encode([UInt8](repeating: 9, count: 32))
        let k2 = "k2:" + Base64URL.encode([UInt8](repeating: 7, count: 32))
        // Step two of a rotation: one replica already signs with the new key, the other not yet.
        let before = "\(k1),\(k2)", after = "\(k2),\(k1)"
        func refresh(on ring: String, _ token: String) async throws -> TestResponse {
            // A reuse interval that outlasts two start-ups on a loaded machine.
            let replica = try await makeTestApp(
                database: database,
                environment: ["BFF_AUTH_RATE_LIMIT": "10000", "BFF_JWT_KEYS": ring, "BFF_REFRESH_REUSE_INTERVAL": "300"])
            return try await replica.live { client in
                try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(token))
            }
        }
        for (first, second) in [(before, after), (after, before)] {
            let pair = try await login()
            let rotated = try await refresh(on: first, pair.refreshToken)
            #expect(rotated.status == .ok, "\(rotated.text)")
            let retried = try await refresh(on: second, pair.refreshToken)
            #expect(retried.status == .ok, "\(retried.text)")
            let child = try #require(rotated.json["refresh_token"] as? String)
            #expect(retried.json["refresh_token"] as? String == child)
            #expect(try await refresh(on: second, child).status == .ok)
        }
    }

    @Test("reuse after the interval revokes the whole family: 401 refresh_reused, and the child and its access token die too")
    func reuseAfterIntervalRevokes() async throws {
        let pair = try await login()
        let logs = LogCapture()
        let app = try await makeTestApp(
            database: database,
            environment: ["BFF_AUTH_RATE_LIMIT": "10000", "BFF_REFRESH_REUSE_INTERVAL": "1", "BFF_REVOCATION_POLL_INTERVAL": "60"],
            logs: logs)
        let reuseRequestID = try await app.live { client in
            let first = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            let child = try #require(first.json["refresh_token"] as? String)
            let childAccess = try #require(first.json["access_token"] as? String)
            #expect(try await client.me(childAccess).status == .ok)
            try await Task.sleep(for: .milliseconds(2100))
            let reused = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json", .requestID: "req-reuse-1"],
                body: Self.body(pair.refreshToken))
            #expect(reused.status == .unauthorized && reused.errorCode == "refresh_reused")
            let childAfter = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(child))
            #expect(childAfter.status == .unauthorized && childAfter.errorCode == "session_revoked")
            // The thief's access token too, at once: the replica that detected the reuse does not
            // wait for its next poll (a minute away here).
            let thief = try await client.me(childAccess)
            #expect(thief.status == .unauthorized && thief.errorCode == "invalid_token")
            return reused.headers[.requestID]
        }
        // The security event names the request that caused it, although the store logs through the
        // process's logger rather than the request's.
        let alert = logs.entries().first { $0["event"] as? String == "refresh_reuse_detected" }
        #expect(reuseRequestID == "req-reuse-1")
        #expect(alert?["request_id"] as? String == "req-reuse-1", "\(String(describing: alert))")
        let reason = try await database.withClient { client in
            let rows = try await client.query("SELECT revoked_reason FROM refresh_families WHERE device_id = \(Self.device) AND revoked_at IS NOT NULL")
            var reasons: [String] = []
            for try await reason in rows.decode(String.self) { reasons.append(reason) }
            return reasons
        }
        #expect(reason.contains("reuse_detected"))
    }

    @Test("a spent token presented while the family is at its rate limit still revokes the family: reuse is never rate limited")
    func reuseDetectedAtTheFamilyLimit() async throws {
        let pair = try await login()
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000", "BFF_REFRESH_REUSE_INTERVAL": "0"])
        try await app.live { client in
            // A thief rotates the stolen token as often as the family's limit allows (10 a minute,
            // and one more each 6 s a slow machine takes).
            var head = pair.refreshToken
            var limited = false
            for _ in 0..<20 where !limited {
                let rotated = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(head))
                if rotated.status == .tooManyRequests {
                    #expect(rotated.errorCode == "rate_limited")
                    limited = true
                } else {
                    head = try #require(rotated.json["refresh_token"] as? String, "\(rotated.status): \(rotated.text)")
                }
            }
            try #require(limited)
            // The learner's app presents the token it still holds.
            let reused = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(reused.status == .unauthorized && reused.errorCode == "refresh_reused", "\(reused.status): \(reused.text)")
            let thief = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(head))
            #expect(thief.status == .unauthorized && thief.errorCode == "session_revoked", "\(thief.status): \(thief.text)")
        }
    }

    @Test("a token presented from another device is invalid_refresh_token and revokes its family, access tokens included")
    func deviceMismatchRevokes() async throws {
        let pair = try await login()
        let app = try await makeTestApp(
            database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000", "BFF_REVOCATION_POLL_INTERVAL": "60"])
        try await app.live { client in
            #expect(try await client.me(pair.accessToken).status == .ok)
            let stolen = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken, device: "attacker-device"))
            #expect(stolen.status == .unauthorized && stolen.errorCode == "invalid_refresh_token")
            // The owner's access token ends with the family, without waiting for a poll.
            #expect(try await client.me(pair.accessToken).status == .unauthorized)
            let owner = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(owner.status == .unauthorized && owner.errorCode == "session_revoked")
        }
    }

    @Test("unknown → invalid_refresh_token; malformed bodies → 400/422; logout → session_revoked")
    func otherRefusals() async throws {
        let pair = try await login()
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            let unknown = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(SecureRandom.token()))
            #expect(unknown.status == .unauthorized && unknown.errorCode == "invalid_refresh_token")
            let short = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body("abc"))
            #expect(short.status == .unprocessableContent)
            // Within the contract's pattern, but its last character has unused bits set: no token
            // this service issued, so unknown rather than malformed.
            let stray = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(String(repeating: "A", count: 42) + "B"))
            #expect(stray.status == .unauthorized && stray.errorCode == "invalid_refresh_token", "\(stray.text)")
            let outside = try await client.execute(
                uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(String(repeating: "A", count: 42) + "="))
            #expect(outside.status == .unprocessableContent)
            let broken = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: ByteBuffer(string: "{"))
            #expect(broken.status == .badRequest && broken.errorCode == "invalid_json")
            let logout = try await client.execute(uri: "/api/v1/auth/logout", method: .post, headers: [.authorization: "Bearer \(pair.accessToken)"])
            #expect(logout.status == .noContent)
            let after = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(after.status == .unauthorized && after.errorCode == "session_revoked")
        }
    }

    @Test("an expired refresh token is refused with refresh_expired")
    func expired() async throws {
        let pair = try await login()
        let hash = Digest.sha256(pair.refreshToken)
        try await database.withClient { client in
            _ = try await client.query("UPDATE refresh_tokens SET issued_at = now() - interval '31 days', expires_at = now() - interval '1 day' WHERE token_hash = \(hash)")
        }
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            let response = try await client.execute(uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
            #expect(response.status == .unauthorized && response.errorCode == "refresh_expired")
        }
    }

    @Test("20 concurrent refreshes of one token leave exactly one head; every success is the same pair; the rest are rate limited")
    func concurrentRefreshes() async throws {
        let pair = try await login()
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        let responses = try await app.live(.ahc(.http)) { client in
            try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let response = try await client.execute(
                            uri: "/api/v1/auth/refresh", method: .post, headers: Self.json, body: Self.body(pair.refreshToken))
                        return (response.status, response.json["refresh_token"] as? String)
                    }
                }
                var all: [(HTTPResponse.Status, String?)] = []
                for try await response in group { all.append(response) }
                return all
            }
        }
        let successes = responses.filter { $0.0 == .ok }
        #expect(!successes.isEmpty && successes.count <= 10)
        #expect(Set(successes.compactMap(\.1)).count == 1)
        #expect(responses.allSatisfy { $0.0 == .ok || $0.0 == .tooManyRequests })
        let hash = Digest.sha256(pair.refreshToken)
        let heads = try await database.withClient { client in
            let rows = try await client.query(
                """
                SELECT count(*)::int FROM refresh_tokens
                WHERE used_at IS NULL AND family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = \(hash))
                """)
            for try await count in rows.decode(Int.self) { return count }
            return -1
        }
        #expect(heads == 1)
    }
}
