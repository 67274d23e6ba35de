import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// `POST /api/v1/push/register` and `/unregister` (API-040) against a real database.
@Suite("Push token registration", .needsDatabase, .timeLimit(.minutes(3)))
struct PushRegistrationTests {
    let database: DatabaseURL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
    }

    /// An FCM token as Firebase issues them: `instance:APA91b…`.
    static func fcmToken(_ seed: String) -> String {
        "\(seed.prefix(11)):APA91b" + String(repeating: "x", count: 140) + seed
    }

    static let apnsToken = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

    static func unregistration(_ token: String) -> String {
        #"{"token":"\#(token)"}"#
    }

    static func body(_ token: String, device: String, platform: String = "ios", provider: String? = nil) -> String {
        #"{"token":"\#(token)","platform":"\#(platform)","device_id":"\#(device)""# + (provider.map { #","provider":"\#($0)""# } ?? "") + "}"
    }

    struct Row: Sendable, Equatable {
        let user: UUID
        let token: String
        let platform: String
        let provider: String
        let device: String
    }

    func rows() async throws -> [Row] {
        try await Self.rows(in: database)
    }

    static func rows(in database: DatabaseURL) async throws -> [Row] {
        try await database.withClient { client in
            var rows: [Row] = []
            for try await (user, token, platform, provider, device) in try await client.query(
                "SELECT user_id, token, platform, provider, device_id FROM push_tokens ORDER BY user_id, token"
            ).decode((UUID, String, String, String, String).self) {
                rows.append(Row(user: user, token: token, platform: platform, provider: provider, device: device))
            }
            return rows
        }
    }

    @Test("registering is idempotent: the same token again is 204 and one row; the provider follows the token when left out")
    func idempotent() async throws {
        let aiko = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let token = Self.fcmToken("aiko-phone-1")
            for _ in 0..<5 {
                let response = try await client.call(.post, "/api/v1/push/register", as: aiko, json: Self.body(token, device: aiko.deviceID))
                #expect(response.status == .noContent)
            }
            #expect(try await Self.rows(in: database) == [Row(user: aiko.id, token: token, platform: "ios", provider: "fcm", device: aiko.deviceID)])
            // An APNs device token, left without a provider, is taken as one.
            #expect(try await client.call(.post, "/api/v1/push/register", as: aiko, json: Self.body(Self.apnsToken, device: aiko.deviceID)).status == .noContent)
            // A device holds one token: the new one replaced the FCM token.
            #expect(try await Self.rows(in: database) == [Row(user: aiko.id, token: Self.apnsToken, platform: "ios", provider: "apns", device: aiko.deviceID)])
        }
    }

    @Test("a token registered by another account moves to the caller; the other account keeps nothing of it")
    func tokenMoves() async throws {
        let aiko = try await Learner.make(database: database)
        let ben = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client async throws in
            let token = Self.fcmToken("shared-phone")
            #expect(try await client.call(.post, "/api/v1/push/register", as: aiko, json: Self.body(token, device: aiko.deviceID, platform: "android")).status == .noContent)
            #expect(try await client.call(.post, "/api/v1/push/register", as: ben, json: Self.body(token, device: ben.deviceID, platform: "android")).status == .noContent)
            #expect(try await Self.rows(in: database) == [Row(user: ben.id, token: token, platform: "android", provider: "fcm", device: ben.deviceID)])
            // Aiko's unregister of a token that is no longer hers changes nothing.
            #expect(try await client.call(.post, "/api/v1/push/unregister", as: aiko, json: Self.unregistration(token)).status == .noContent)
            #expect(try await Self.rows(in: database).count == 1)
            #expect(try await client.call(.post, "/api/v1/push/unregister", as: ben, json: Self.unregistration(Self.fcmToken("never-registered"))).status == .noContent)
            #expect(try await Self.rows(in: database).count == 1)
            #expect(try await client.call(.post, "/api/v1/push/unregister", as: ben, json: Self.unregistration(token)).status == .noContent)
            #expect(try await Self.rows(in: database).isEmpty)
        }
    }

    @Test("two accounts registering one token at once, many times over: every call is 204 and the token keeps exactly one owner")
    func concurrentRegistrations() async throws {
        var made: [(Learner, Learner)] = []
        for _ in 0..<20 { made.append((try await Learner.make(database: database), try await Learner.make(database: database))) }
        let pairs = made
        let app = try await makeTestApp(database: database)
        let database = database
        try await app.live { client async throws in
            // Over the server's port with a connection per request: the test client's one connection would queue them.
            let port = try #require(client.port)
            let statuses = try await withThrowingTaskGroup(of: [UInt].self) { group in
                for (index, pair) in pairs.enumerated() {
                    group.addTask {
                        let token = Self.fcmToken("race-\(index)")
                        return try await withThrowingTaskGroup(of: UInt.self) { both in
                            for learner in [pair.0, pair.1] {
                                both.addTask {
                                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/v1/push/register")
                                    request.method = .POST
                                    request.headers.add(name: "authorization", value: "Bearer \(learner.accessToken)")
                                    request.headers.add(name: "content-type", value: "application/json")
                                    request.body = .bytes(ByteBuffer(string: Self.body(token, device: learner.deviceID, platform: "android")))
                                    return try await HTTPClient.shared.execute(request, timeout: .seconds(20)).status.code
                                }
                            }
                            return try await both.reduce(into: []) { $0.append($1) }
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(statuses.count == 40)
            #expect(statuses.allSatisfy { $0 == 204 }, "\(statuses.filter { $0 != 204 })")
        }
        let rows = try await Self.rows(in: database)
        #expect(rows.count == 20)
        for (index, pair) in pairs.enumerated() {
            let owners = rows.filter { $0.token == Self.fcmToken("race-\(index)") }.map(\.user)
            #expect(owners.count == 1 && [pair.0.id, pair.1.id].contains(owners[0]), "pair \(index): \(owners)")
        }
    }

    @Test("every sign-out takes the device's tokens: bff auth revoke --user and --device, and a back-channel logout")
    func signOutsRemoveTokens() async throws {
        let aiko = try await Learner.make(database: database)
        let ben = try await Learner.make(database: database)
        let chika = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client async throws in
            for learner in [aiko, ben, chika] {
                let body = Self.body(Self.fcmToken("phone-\(learner.id)"), device: learner.deviceID, platform: "android")
                let response = try await client.call(.post, "/api/v1/push/register", as: learner, json: body)
                #expect(response.status == .noContent)
            }
        }
        let environment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        #expect(Set(try await rows().map(\.user)) == [aiko.id, ben.id, chika.id])
        #expect(try await Commands.revoke(environment: environment, userID: aiko.id, deviceID: nil) == 1)
        #expect(Set(try await rows().map(\.user)) == [ben.id, chika.id])
        #expect(try await Commands.revoke(environment: environment, userID: nil, deviceID: ben.deviceID) == 1)
        #expect(try await rows().map(\.user) == [chika.id])
        // Chika's provider ends her session (operator-made accounts have the issuer urn:bff:operator).
        let revoked = try await database.withClient { client in
            try await IdentityStore(database: Database(client: client)).backchannelLogout(
                issuer: "urn:bff:operator", jti: UUID().uuidString, issuedAt: Date(), keepUntil: Date().addingTimeInterval(3_600),
                subject: chika.id.uuidString.lowercased(), idpSessionID: nil)
        }
        #expect(revoked?.count == 1)
        #expect(try await rows().isEmpty)
    }

    @Test("at most 10 devices of a user keep tokens: the 11th drops the least recently seen")
    func tenDevices() async throws {
        let userID = UUID()
        let environment = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let devices = (0..<11).map { "tablet-\(userID.uuidString.prefix(8))-\($0)" }
        let pairs = try await Commands.issueTokens(environment: environment, for: devices.map { (userID, $0) }, scopes: ["push:register"])
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            for (index, device) in devices.enumerated() {
                let learner = Learner(id: userID, accessToken: pairs[index].accessToken)
                let response = try await client.execute(
                    uri: "/api/v1/push/register", method: .post, headers: learner.headers,
                    body: .init(string: Self.body(Self.fcmToken("device-\(index)"), device: device, platform: "android")))
                #expect(response.status == .noContent, "\(device)")
                // Distinct last-seen times, as devices registering on different days have.
                try await database.withClient { client in
                    _ = try await client.query("UPDATE push_tokens SET updated_at = now() - (\(20 - index) * interval '1 minute') WHERE device_id = \(device)")
                }
            }
            let kept = try await Self.rows(in: database).map(\.device)
            #expect(kept.count == 10)
            #expect(Set(kept) == Set(devices.dropFirst()))
        }
    }

    @Test(
        "bad input is the documented 4xx with nothing stored",
        arguments: [
            ("unknown platform", #"{"token":"\#(Self.fcmToken("x"))","platform":"windows","device_id":"DEVICE"}"#),
            ("unknown provider", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios","device_id":"DEVICE","provider":"wns"}"#),
            ("empty provider", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios","device_id":"DEVICE","provider":""}"#),
            ("empty token", #"{"token":"","platform":"ios","device_id":"DEVICE"}"#),
            ("short token", #"{"token":"abc","platform":"ios","device_id":"DEVICE"}"#),
            ("oversize token", #"{"token":"\#(String(repeating: "a", count: 2049))","platform":"android","device_id":"DEVICE"}"#),
            ("a dot in the token", #"{"token":"\#(Self.fcmToken("x")).x","platform":"android","device_id":"DEVICE"}"#),
            ("a space in the token", #"{"token":"\#(Self.fcmToken("x")) x","platform":"android","device_id":"DEVICE"}"#),
            ("non-ASCII token", #"{"token":"\#(Self.fcmToken("x"))é","platform":"android","device_id":"DEVICE"}"#),
            ("apns on android", #"{"token":"\#(Self.apnsToken)","platform":"android","device_id":"DEVICE","provider":"apns"}"#),
            ("apns token not hex", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios","device_id":"DEVICE","provider":"apns"}"#),
            ("apns token of odd length", #"{"token":"\#(Self.apnsToken)a","platform":"ios","device_id":"DEVICE","provider":"apns"}"#),
            ("another device", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios","device_id":"someone-elses-pad"}"#),
            ("no device", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios"}"#),
            ("an extra member", #"{"token":"\#(Self.fcmToken("x"))","platform":"ios","device_id":"DEVICE","badge":1}"#),
        ])
    func badInput(_ case: String, _ template: String) async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let response = try await client.call(
                .post, "/api/v1/push/register", as: learner, json: template.replacingOccurrences(of: "DEVICE", with: learner.deviceID))
            #expect(response.status == .unprocessableContent, "\(`case`): \(response.status)")
            #expect(response.errorCode == "validation_failed", "\(`case`)")
            let unregister = try await client.call(.post, "/api/v1/push/unregister", as: learner, json: #"{"token":""}"#)
            #expect(unregister.status == .unprocessableContent)
        }
        #expect(try await Self.rows(in: database).isEmpty)
    }

    @Test("registration needs the push:register scope")
    func scope() async throws {
        let learner = try await Learner.make(database: database, scopes: ["chat:rw"])
        let app = try await makeTestApp(database: database)
        try await app.live { client in
            let response = try await client.call(.post, "/api/v1/push/register", as: learner, json: Self.body(Self.fcmToken("x"), device: learner.deviceID))
            #expect(response.status == .forbidden)
            #expect(response.errorCode == "insufficient_scope")
        }
        #expect(try await Self.rows(in: database).isEmpty)
    }
}
