import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Devices", .needsDatabase, .timeLimit(.minutes(3)))
struct DeviceTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    private func signIn(_ userID: UUID, on deviceID: String) async throws -> Commands.IssuedPair {
        try await Commands.issueToken(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]),
            userID: userID, deviceID: deviceID, scopes: AccessTokens.allScopes)
    }

    private static func refresh(_ pair: Commands.IssuedPair, on deviceID: String, with client: some TestClientProtocol) async throws -> TestResponse {
        try await client.execute(
            uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
            body: ByteBuffer(string: #"{"refresh_token":"\#(pair.refreshToken)","device_id":"\#(deviceID)"}"#))
    }

    @Test("a lost-device report revokes that device's sessions and push tokens; another user's device is 404 and untouched")
    func lostDevice() async throws {
        let alice = UUID(), bob = UUID()
        let alicePhone = try await signIn(alice, on: "alice-phone-1")
        let aliceTablet = try await signIn(alice, on: "alice-tablet-1")
        let bobPhone = try await signIn(bob, on: "bob-phone-01")
        try await database.withClient { client in
            _ = try await client.query("INSERT INTO push_tokens (user_id, token, platform, device_id) VALUES (\(alice), 'tok-a', 'ios', 'alice-phone-1'), (\(bob), 'tok-b', 'android', 'bob-phone-01')")
        }
        let app = try await makeTestApp(database: database, environment: ["BFF_AUTH_RATE_LIMIT": "10000"])
        try await app.live { client in
            let tablet: HTTPFields = [.authorization: "Bearer \(aliceTablet.accessToken)"]
            let foreign = try await client.execute(uri: "/api/v1/devices/bob-phone-01", method: .delete, headers: tablet)
            #expect(foreign.status == .notFound && foreign.errorCode == "not_found")
            let lost = try await client.execute(uri: "/api/v1/devices/alice-phone-1", method: .delete, headers: tablet)
            #expect(lost.status == .noContent)
            let again = try await client.execute(uri: "/api/v1/devices/alice-phone-1", method: .delete, headers: tablet)
            #expect(again.status == .notFound)
            let list = try await client.execute(uri: "/api/v1/devices", method: .get, headers: tablet)
            #expect((list.json["items"] as? [[String: Any]])?.map { $0["device_id"] as? String } == ["alice-tablet-1"])
            for (pair, device, expected) in [(alicePhone, "alice-phone-1", "session_revoked"), (bobPhone, "bob-phone-01", nil)] {
                #expect(try await Self.refresh(pair, on: device, with: client).errorCode == expected)
            }
            // The lost phone's access token is refused at once; the other sessions keep theirs.
            for (pair, expected) in [(alicePhone, HTTPResponse.Status.unauthorized), (aliceTablet, .ok), (bobPhone, .ok)] {
                let me = try await client.me(pair.accessToken)
                #expect(me.status == expected)
            }
        }
        let tokens = try await database.withClient { client in
            let rows = try await client.query("SELECT token FROM push_tokens ORDER BY token")
            var tokens: [String] = []
            for try await token in rows.decode(String.self) { tokens.append(token) }
            return tokens
        }
        #expect(tokens == ["tok-b"])
    }

    @Test("one device, one account: signing in on a device another account holds moves it and ends that account's sessions and push tokens there, logged as a security event without tokens")
    func deviceTakenOver() async throws {
        let logs = LogCapture()
        try await LocalIdP().serve { [database] idp in
            let app = try await makeTestApp(
                database: database, environment: ["BFF_OIDC_ISSUER": idp.issuer, "BFF_REVOCATION_POLL_INTERVAL": "60"], logs: logs)
            try await app.live { client in
                func signIn(_ subject: String, on device: String) async throws -> (access: String, refresh: String, user: UUID) {
                    var claims = TestIDClaims(iss: .init(value: idp.issuer))
                    claims.sub = .init(value: subject)
                    let response = try await idp.signIn(AppLogin(deviceID: device), as: claims, with: client)
                    #expect(response.status == .ok, "\(response.text)")
                    let userID = (response.json["user"] as? [String: Any])?["id"] as? String
                    let user = try #require(userID.flatMap(UUID.init(uuidString:)))
                    return (try #require(response.json["access_token"] as? String), try #require(response.json["refresh_token"] as? String), user)
                }
                func deviceIDs(_ access: String) async throws -> Set<String> {
                    let list = try await client.execute(uri: "/api/v1/devices", method: .get, headers: [.authorization: "Bearer \(access)"])
                    return Set((list.json["items"] as? [[String: Any]] ?? []).compactMap { $0["device_id"] as? String })
                }
                let aikoOnPad = try await signIn("aiko", on: "school-ipad-7")
                let aikoPhone = try await signIn("aiko", on: "aiko-phone-1")
                // The same account signing in again on its own device takes nothing from anyone.
                let aikoAgain = try await signIn("aiko", on: "school-ipad-7")
                #expect(try await client.me(aikoOnPad.access).status == .ok)
                try await database.withClient { client in
                    _ = try await client.query(
                        """
                        INSERT INTO push_tokens (user_id, token, platform, device_id)
                        VALUES (\(aikoPhone.user), 'tok-pad', 'ios', 'school-ipad-7'), (\(aikoPhone.user), 'tok-phone', 'ios', 'aiko-phone-1')
                        """)
                }
                #expect(try await deviceIDs(aikoPhone.access) == ["aiko-phone-1", "school-ipad-7"])

                let benOnPad = try await signIn("ben", on: "school-ipad-7")
                for ended in [aikoOnPad, aikoAgain] {
                    #expect(try await client.me(ended.access).status == .unauthorized, "ended at once, not at the next poll")
                    let refresh = try await client.execute(
                        uri: "/api/v1/auth/refresh", method: .post, headers: [.contentType: "application/json"],
                        body: ByteBuffer(string: #"{"refresh_token":"\#(ended.refresh)","device_id":"school-ipad-7"}"#))
                    #expect(refresh.status == .unauthorized && refresh.errorCode == "session_revoked", "\(refresh.text)")
                }
                #expect(try await client.me(aikoPhone.access).status == .ok)
                #expect(try await client.me(benOnPad.access).status == .ok)
                #expect(try await deviceIDs(aikoPhone.access) == ["aiko-phone-1"])
                #expect(try await deviceIDs(benOnPad.access) == ["school-ipad-7"])
                let lost = try await client.execute(
                    uri: "/api/v1/devices/school-ipad-7", method: .delete, headers: [.authorization: "Bearer \(aikoPhone.access)"])
                #expect(lost.status == .notFound, "the pad is no longer Aiko's to report")

                let tokens = try await database.withClient { client in
                    try await client.query("SELECT token FROM push_tokens ORDER BY token").collect().map { try $0.decode(String.self) }
                }
                #expect(tokens == ["tok-phone"])
                let reasons = try await database.withClient { client in
                    try await client.query("SELECT revoked_reason FROM refresh_families WHERE user_id = \(aikoPhone.user) AND revoked_at IS NOT NULL")
                        .collect().map { try $0.decode(String.self) }
                }
                #expect(reasons == ["device_taken_over", "device_taken_over"])
                let events = logs.entries().filter { $0["event"] as? String == "device_taken_over" }
                #expect(events.count == 1)
                #expect(events.first?["previous_user_ids"] as? [String] == [aikoPhone.user.uuidString])
                for secret in [aikoOnPad.access, aikoOnPad.refresh, benOnPad.access, benOnPad.refresh, "tok-pad"] {
                    #expect(!logs.all.joined().contains(secret))
                }
            }
        }
    }

    @Test("bff auth issue follows the same rule: issuing for another account on a device ends the sessions there")
    func issueTakesTheDevice() async throws {
        let aiko = try await signIn(UUID(), on: "shared-tablet-1")
        let ben = try await signIn(UUID(), on: "shared-tablet-1")
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let aikoRefresh = try await Self.refresh(aiko, on: "shared-tablet-1", with: client)
            let benRefresh = try await Self.refresh(ben, on: "shared-tablet-1", with: client)
            #expect(aikoRefresh.errorCode == "session_revoked")
            #expect(benRefresh.status == .ok)
        }
    }
}
