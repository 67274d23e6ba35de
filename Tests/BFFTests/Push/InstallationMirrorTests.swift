import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import PostgresNIO
import StandIns
import Testing

@testable import BFF
@testable import BFFJobs
@testable import BFFPlatform

/// The Notification Hubs route's installations against a real database, job runtime and the local
/// hub: every change of push tokens enqueues its devices' mirrors in its own transaction, and the
/// jobs leave the hub with what the database holds, through the hub's faults.
@Suite("Notification Hubs installation mirrors", .needsDatabase, .timeLimit(.minutes(3)))
struct InstallationMirrorTests {
    let database: DatabaseURL
    let tls: LocalTLS

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
        tls = try LocalTLS.make()
    }

    struct Mirror: Sendable, Equatable {
        let device: String
        let user: UUID?
        let state: String
        let attempt: Int
        let error: String?
    }

    /// The mirror jobs, oldest first.
    func mirrors() async throws -> [Mirror] {
        try await database.withClient { client in
            var rows: [Mirror] = []
            for try await (device, user, state, attempt, error) in try await client.query(
                "SELECT args->>'deviceID', user_id, state, attempt, last_error FROM jobs WHERE kind = \(InstallationMirror.kind) ORDER BY id"
            ).decode((String, UUID?, String, Int, String?).self) {
                rows.append(Mirror(device: device, user: user, state: state, attempt: attempt, error: error))
            }
            return rows
        }
    }

    func hubEnvironment(_ hubs: LocalNotificationHubs, base: String) -> [String: String] {
        [
            "BFF_PUSH_ROUTE": "notification-hubs", "BFF_NH_CONNECTION_STRING": hubs.connectionString(base: base), "BFF_NH_HUB": hubs.hub,
            "BFF_OUTBOUND_CA_FILE": tls.certificatePath,
            // The test runs the mirrors itself, after looking at what was enqueued.
            "BFF_JOBS_CONCURRENCY": "0",
        ]
    }

    func hubClient(_ hubs: LocalNotificationHubs, base: String, key: String? = nil) throws -> NotificationHubsClient {
        var text = hubs.connectionString(base: base)
        if let key { text = text.replacingOccurrences(of: hubs.key, with: key) }
        let connection = try #require(NotificationHubsSender.Connection(connectionString: text))
        return NotificationHubsClient(connection: connection, hub: hubs.hub, http: try OutboundHTTP.client(extraCAFile: tls.certificatePath))
    }

    /// Runs the queued mirrors with a worker of their kind alone until none is waiting.
    /// Runs `body` against a live app on the hub's route, `hubs` served locally as its hub (`base`).
    /// `environment` adds to (or overrides) the hub's.
    func withHubApp(
        _ hubs: LocalNotificationHubs, environment: [String: String] = [:],
        _ body: @escaping @Sendable (_ base: String, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await serveLocally(hubs.router, tls: tls) { base in
            let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: base).merging(environment) { $1 })
            try await app.live { client in try await body(base, client) }
        }
    }

    /// A learner signed in on two devices, named `first` and `second` with the start of the learner's id.
    func signedInOnTwoDevices(_ first: String, _ second: String) async throws -> (userID: UUID, devices: [String], learners: [Learner]) {
        let userID = UUID()
        let devices = [first, second].map { "\($0)-\(userID.uuidString.prefix(8))" }
        let pairs = try await Commands.issueTokens(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]), for: devices.map { (userID, $0) },
            scopes: AccessTokens.allScopes)
        return (userID, devices, pairs.map { Learner(id: userID, accessToken: $0.accessToken) })
    }

    func runMirrors(_ hubs: LocalNotificationHubs, base: String, key: String? = nil) async throws {
        let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2)), timeout: .seconds(10))
        let job = InstallationMirrorJob(tokens: PushTokenStore(database: pool), hub: try hubClient(hubs, base: base, key: key), logger: TestEnvironment.quietLogger)
        var configuration = JobRuntimeConfiguration(concurrency: 4, pollInterval: .milliseconds(100), lease: .seconds(30), drain: .seconds(2))
        configuration.backoff = Backoff(base: .milliseconds(20), cap: .milliseconds(200))
        let worker = JobWorker(
            database: pool, databaseURL: database, handlers: [job.handler], configuration: configuration, logger: TestEnvironment.quietLogger)
        try await Commands.withDatabase(pool.client) { _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                defer { worker.stop() }
                let settled = try await eventually { try await mirrors().allSatisfy { $0.state == "completed" || $0.state == "dead" } }
                #expect(settled)
            }
        }
    }

    static func tag(_ userID: UUID) -> String { "user:\(userID.uuidString.lowercased())" }

    /// A whole login through `idp` as `subject` on `device`, in the IdP session `sid`: the learner
    /// it signed in, with the session's access token.
    func signIn(_ subject: String, on device: String, sid: String = "idp-session-1", idp: LocalIdP, client: some TestClientProtocol) async throws -> Learner {
        var claims = TestIDClaims(iss: .init(value: idp.issuer))
        claims.sub = .init(value: subject)
        claims.sid = sid
        let response = try await idp.signIn(AppLogin(deviceID: device), as: claims, with: client)
        #expect(response.status == .ok, "\(response.text)")
        let userID = ((response.json["user"] as? [String: Any])?["id"] as? String).flatMap(UUID.init(uuidString:))
        return Learner(id: try #require(userID), accessToken: try #require(response.json["access_token"] as? String))
    }

    /// Registers the FCM `token` of an Android `device` for `learner`'s session on it.
    func register(_ token: String, device: String, as learner: Learner, with client: some TestClientProtocol) async throws {
        let body = PushRegistrationTests.body(token, device: device, platform: "android")
        let answer = try await client.call(.post, "/api/v1/push/register", as: learner, json: body)
        #expect(answer.status == .noContent, "\(answer.text)")
    }

    /// The devices the local hub holds an installation of.
    static func installed(_ hubs: LocalNotificationHubs) -> Set<String> {
        hubs.installations.withLockedValue { Set($0.keys) }
    }

    @Test("registering, a new token and unregistering each enqueue the device's mirror; run, they leave the hub with the device's installation, then none")
    func registration() async throws {
        let learner = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            let fcm = PushRegistrationTests.fcmToken("aiko-phone-1")
            let register = PushRegistrationTests.body(fcm, device: learner.deviceID)
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: register).status == .noContent)
            // The app registers on every launch: an unchanged registration enqueues nothing more.
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: register).status == .noContent)
            #expect(try await mirrors().map(\.device) == [learner.deviceID])
            // Tied to no user: the mirror of a deleted account's device must outlive its rows.
            #expect(try await mirrors().map(\.user) == [nil])
            try await runMirrors(hubs, base: base)
            #expect(
                hubs.installations.withLockedValue { $0 } == [
                    learner.deviceID: .init(installationId: learner.deviceID, platform: "fcmv1", pushChannel: fcm, tags: [Self.tag(learner.id)])
                ])

            let apns = PushRegistrationTests.body(PushRegistrationTests.apnsToken, device: learner.deviceID, provider: "apns")
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: apns).status == .noContent)
            #expect(try await mirrors().count == 2)
            try await runMirrors(hubs, base: base)
            #expect(
                hubs.installations.withLockedValue { $0[learner.deviceID] }
                    == .init(
                        installationId: learner.deviceID, platform: "apns", pushChannel: PushRegistrationTests.apnsToken,
                        tags: [Self.tag(learner.id)]))

            let unregister = PushRegistrationTests.unregistration(PushRegistrationTests.apnsToken)
            #expect(try await client.call(.post, "/api/v1/push/unregister", as: learner, json: unregister).status == .noContent)
            #expect(try await mirrors().count == 3)
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
            #expect(try await mirrors().allSatisfy { $0.state == "completed" })
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a token registered by another account moves its installation's tag to that account")
    func tokenMoves() async throws {
        let aiko = try await Learner.make(database: database)
        let ben = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            let token = PushRegistrationTests.fcmToken("shared-phone")
            for learner in [aiko, ben] {
                let body = PushRegistrationTests.body(token, device: learner.deviceID, platform: "android")
                #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status == .noContent)
            }
            // Ben's registration mirrors his device and the one the token left.
            #expect(Set(try await mirrors().map(\.device)) == [aiko.deviceID, ben.deviceID])
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0 }.mapValues(\.tags) == [ben.deviceID: [Self.tag(ben.id)]])
        }
    }

    @Test("logout and account deletion each enqueue the device's mirror; run, the hub keeps no installation of theirs")
    func signOutAndDeletion() async throws {
        let aiko = try await Learner.make(database: database)
        let ben = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            for learner in [aiko, ben] {
                let body = PushRegistrationTests.body(PushRegistrationTests.fcmToken("phone-\(learner.id)"), device: learner.deviceID)
                #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status == .noContent)
            }
            try await runMirrors(hubs, base: base)
            #expect(Set(hubs.installations.withLockedValue { $0.keys }) == [aiko.deviceID, ben.deviceID])

            #expect(try await client.call(.post, "/api/v1/auth/logout", as: aiko).status == .noContent)
            #expect(try await mirrors().map(\.device).last == aiko.deviceID)
            #expect(try await mirrors().count == 3)
            let deleted = try await client.call(.delete, "/api/v1/me", as: ben)
            #expect(deleted.status == .ok, "\(deleted.text)")
            // Ben's rows and the jobs tied to him are gone; his device's mirror is not.
            #expect(try await mirrors().map(\.device).last == ben.deviceID)
            #expect(try await mirrors().count == 4)
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("bff auth revoke enqueues the mirrors of the devices whose tokens it took")
    func operatorRevocation() async throws {
        let aiko = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let environment = hubEnvironment(hubs, base: base)
            let app = try await makeTestApp(database: database, environment: environment)
            try await app.live { client in
                let body = PushRegistrationTests.body(PushRegistrationTests.fcmToken("aiko-tablet"), device: aiko.deviceID, platform: "android")
                let answer1 = try await client.call(.post, "/api/v1/push/register", as: aiko, json: body)
                #expect(answer1.status == .noContent)
            }
            let revoke = TestEnvironment.serverEnvironment(database: database, environment.merging(["BFF_LOG_LEVEL": "critical"]) { $1 })
            #expect(try await Commands.revoke(environment: revoke, userID: aiko.id, deviceID: nil) == 1)
            #expect(try await mirrors().map(\.device) == [aiko.deviceID, aiko.deviceID])
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
        }
    }

    @Test("bff auth revoke --device enqueues that device's mirror; run, the hub drops its installation and keeps the others")
    func operatorDeviceRevocation() async throws {
        let aiko = try await Learner.make(database: database)
        let ben = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let environment = hubEnvironment(hubs, base: base)
            let app = try await makeTestApp(database: database, environment: environment)
            try await app.live { client in
                for learner in [aiko, ben] {
                    try await register(PushRegistrationTests.fcmToken("tablet-\(learner.id)"), device: learner.deviceID, as: learner, with: client)
                }
            }
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == [aiko.deviceID, ben.deviceID])
            let revoke = TestEnvironment.serverEnvironment(database: database, environment.merging(["BFF_LOG_LEVEL": "critical"]) { $1 })
            #expect(try await Commands.revoke(environment: revoke, userID: nil, deviceID: aiko.deviceID) == 1)
            #expect(try await mirrors().map(\.device) == [aiko.deviceID, ben.deviceID, aiko.deviceID])
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == [ben.deviceID])
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a lost-device report enqueues the lost device's mirror; run, the hub keeps the learner's other device only")
    func lostDevice() async throws {
        let (userID, devices, learners) = try await signedInOnTwoDevices("phone", "tablet")
        let (phone, tablet) = (learners[0], learners[1])
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            try await register(PushRegistrationTests.fcmToken("phone-\(userID)"), device: devices[0], as: phone, with: client)
            try await register(PushRegistrationTests.fcmToken("tablet-\(userID)"), device: devices[1], as: tablet, with: client)
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == Set(devices))

            // Reported lost from the tablet: the phone's sessions and token end, and its mirror is
            // enqueued in the same transaction.
            let lost = try await client.call(.delete, "/api/v1/devices/\(devices[0])", as: tablet)
            #expect(lost.status == .noContent, "\(lost.text)")
            #expect(try await PushRegistrationTests.rows(in: database).map(\.device) == [devices[1]])
            #expect(try await mirrors().map(\.device) == [devices[0], devices[1], devices[0]])
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == [devices[1]])
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("signing in on a device another account holds enqueues the device's mirror; run, the hub drops the previous account's installation")
    func deviceTakenOver() async throws {
        let hubs = LocalNotificationHubs()
        try await LocalIdP().serve { idp in
            try await withHubApp(hubs, environment: ["BFF_OIDC_ISSUER": idp.issuer]) { base, client in
                let pad = "school-ipad-\(UUID().uuidString.prefix(8))"
                let aiko = try await signIn("aiko", on: pad, idp: idp, client: client)
                try await register(PushRegistrationTests.fcmToken("aiko-\(aiko.id)"), device: pad, as: aiko, with: client)
                try await runMirrors(hubs, base: base)
                #expect(hubs.installations.withLockedValue { $0[pad]?.tags } == [Self.tag(aiko.id)])

                // Ben signs in on the pad: Aiko's token there ends, and the pad's mirror is enqueued
                // in the login's transaction.
                let ben = try await signIn("ben", on: pad, idp: idp, client: client)
                #expect(ben.id != aiko.id)
                #expect(try await PushRegistrationTests.rows(in: database).isEmpty)
                #expect(try await mirrors().map(\.device) == [pad, pad])
                try await runMirrors(hubs, base: base)
                #expect(hubs.installations.withLockedValue { $0 }.isEmpty, "Aiko's recalls must not reach Ben's pad")

                let token = PushRegistrationTests.fcmToken("ben-\(ben.id)")
                try await register(token, device: pad, as: ben, with: client)
                try await runMirrors(hubs, base: base)
                #expect(
                    hubs.installations.withLockedValue { $0 } == [
                        pad: .init(installationId: pad, platform: "fcmv1", pushChannel: token, tags: [Self.tag(ben.id)])
                    ])
            }
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a back-channel logout enqueues the mirror of each device whose session it ended; run, the hub keeps the learner's other device only")
    func backchannelLogout() async throws {
        let hubs = LocalNotificationHubs()
        try await LocalIdP().serve { idp in
            try await withHubApp(hubs, environment: ["BFF_OIDC_ISSUER": idp.issuer]) { base, client in
                let suffix = UUID().uuidString.prefix(8)
                let phone = "aiko-phone-\(suffix)"
                let tablet = "aiko-tablet-\(suffix)"
                let onPhone = try await signIn("aiko", on: phone, sid: "idp-session-phone", idp: idp, client: client)
                let onTablet = try await signIn("aiko", on: tablet, sid: "idp-session-tablet", idp: idp, client: client)
                try await register(PushRegistrationTests.fcmToken("phone-\(suffix)"), device: phone, as: onPhone, with: client)
                try await register(PushRegistrationTests.fcmToken("tablet-\(suffix)"), device: tablet, as: onTablet, with: client)
                try await runMirrors(hubs, base: base)
                #expect(Self.installed(hubs) == [phone, tablet])

                // The provider ends the phone's IdP session: its family and its token end, and its
                // mirror is enqueued in the same transaction.
                let logoutToken = try await idp.sign(TestLogoutClaims(iss: .init(value: idp.issuer), sub: "aiko", sid: "idp-session-phone"))
                let answer = try await client.execute(
                    uri: "/api/v1/auth/backchannel-logout", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                    body: ByteBuffer(string: "logout_token=\(logoutToken)"))
                #expect(answer.status == .ok, "\(answer.text)")
                #expect(try await PushRegistrationTests.rows(in: database).map(\.device) == [tablet])
                #expect(try await mirrors().map(\.device) == [phone, tablet, phone])
                try await runMirrors(hubs, base: base)
                #expect(Self.installed(hubs) == [tablet])
            }
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("registering an eleventh device enqueues the mirror of the device the cap drops; run, the hub keeps the ten the database keeps")
    func cappedDevice() async throws {
        let userID = UUID()
        let devices = (0..<11).map { "tablet-\(userID.uuidString.prefix(8))-\($0)" }
        let pairs = try await Commands.issueTokens(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]), for: devices.map { (userID, $0) },
            scopes: ["push:register"])
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: base))
            try await app.live { client in
                for (index, device) in devices.enumerated() {
                    let learner = Learner(id: userID, accessToken: pairs[index].accessToken)
                    try await register(PushRegistrationTests.fcmToken("device-\(index)-\(userID)"), device: device, as: learner, with: client)
                    // Distinct last-seen times, as devices registering on different days have.
                    try await database.withClient { client in
                        _ = try await client.query(
                            "UPDATE push_tokens SET updated_at = now() - (\(20 - index) * interval '1 minute') WHERE device_id = \(device)")
                    }
                }
            }
            #expect(Set(try await PushRegistrationTests.rows(in: database).map(\.device)) == Set(devices.dropFirst()))
            // One mirror per registration, and the eleventh's transaction also the first device's.
            let mirrored = try await mirrors().map(\.device)
            #expect(mirrored.count == 12)
            #expect(Array(mirrored.prefix(10)) == Array(devices.prefix(10)))
            #expect(Set(mirrored.suffix(2)) == [devices[0], devices[10]])
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == Set(devices.dropFirst()))
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a token registered on another device of the same learner moves there: both devices' mirrors are enqueued; run, the hub has it on the new device only")
    func tokenMovesBetweenOwnDevices() async throws {
        let (userID, devices, learners) = try await signedInOnTwoDevices("old-phone", "new-phone")
        let (oldPhone, newPhone) = (learners[0], learners[1])
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            let token = PushRegistrationTests.fcmToken("moving-\(userID)")
            try await register(token, device: devices[0], as: oldPhone, with: client)
            try await runMirrors(hubs, base: base)
            #expect(Self.installed(hubs) == [devices[0]])

            try await register(token, device: devices[1], as: newPhone, with: client)
            #expect(try await PushRegistrationTests.rows(in: database).map(\.device) == [devices[1]])
            let mirrored = try await mirrors().map(\.device)
            #expect(mirrored.count == 3)
            #expect(Set(mirrored.suffix(2)) == Set(devices))
            try await runMirrors(hubs, base: base)
            #expect(
                hubs.installations.withLockedValue { $0 } == [
                    devices[1]: .init(installationId: devices[1], platform: "fcmv1", pushChannel: token, tags: [Self.tag(userID)])
                ])
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("an unchanged registration is mirrored again once it is a day old, so the hub's copy is re-asserted while the app is used")
    func dailyReassertion() async throws {
        let learner = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            let token = PushRegistrationTests.fcmToken("daily-\(learner.id)")
            try await register(token, device: learner.deviceID, as: learner, with: client)
            try await register(token, device: learner.deviceID, as: learner, with: client)
            #expect(try await mirrors().count == 1)
            try await runMirrors(hubs, base: base)
            // The hub lost its copy (a hub recreated, say); the app's first launch a day later
            // puts it back.
            hubs.installations.withLockedValue { $0.removeAll() }
            try await database.withClient { client in
                _ = try await client.query("UPDATE push_tokens SET updated_at = now() - interval '25 hours' WHERE device_id = \(learner.deviceID)")
            }
            try await register(token, device: learner.deviceID, as: learner, with: client)
            #expect(try await mirrors().count == 2)
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0[learner.deviceID]?.pushChannel } == token)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("bff push mirror-installations refuses the direct route; on the hub's, run in batches, its mirrors put every device registered before; twice, the same")
    func backfill() async throws {
        // Eight devices of three learners sign in, and seven register while the route is direct:
        // the even ones APNs tokens, the odd ones FCM tokens.
        let users = [UUID(), UUID(), UUID()]
        let targets = (0..<8).map { index in (userID: users[index % 3], deviceID: "backfill-\(index)-\(users[index % 3].uuidString.prefix(8))") }
        let pairs = try await Commands.issueTokens(
            environment: TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"]), for: targets, scopes: AccessTokens.allScopes)
        let registered = Array(targets.prefix(7))
        let tokens = registered.indices.map { index in
            index.isMultiple(of: 2) ? String(repeating: "a", count: 63) + String(index) : PushRegistrationTests.fcmToken("backfill-\(index)")
        }
        let app = try await makeTestApp(database: database, environment: ["BFF_JOBS_CONCURRENCY": "0"])
        try await app.live { client in
            for (index, target) in registered.enumerated() {
                let learner = Learner(id: target.userID, accessToken: pairs[index].accessToken)
                let body: String
                if index.isMultiple(of: 2) {
                    body = PushRegistrationTests.body(tokens[index], device: target.deviceID, provider: "apns")
                } else {
                    body = PushRegistrationTests.body(tokens[index], device: target.deviceID, platform: "android")
                }
                let status = try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status
                #expect(status == .noContent)
            }
        }
        #expect(try await mirrors().isEmpty)

        // Run with the direct route's configuration, the command refuses, and enqueues nothing.
        let direct = TestEnvironment.serverEnvironment(database: database, ["BFF_LOG_LEVEL": "critical"])
        let refusal = await #expect(throws: ConfigurationError.self) {
            try await Commands.pushMirrorInstallations(environment: direct, batchSize: 3)
        }
        #expect(refusal?.variable == "BFF_PUSH_ROUTE")
        #expect(try await mirrors().isEmpty)

        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let environment = TestEnvironment.serverEnvironment(
                database: database, hubEnvironment(hubs, base: base).merging(["BFF_LOG_LEVEL": "critical"]) { $1 })
            let totals = NIOLockedValueBox<[Int]>([])
            let enqueued = try await Commands.pushMirrorInstallations(environment: environment, batchSize: 3) { total in
                totals.withLockedValue { $0.append(total) }
            }
            #expect(enqueued == 7)
            #expect(totals.withLockedValue { $0 } == [3, 6, 7])
            // Each device with a token once, in the order of their ids, tied to no user; the device
            // signed in without a token gets none.
            let ordered = try await database.withClient { client in
                try await client.query("SELECT device_id FROM push_tokens ORDER BY device_id").collect().map { try $0.decode(String.self) }
            }
            #expect(Set(ordered) == Set(registered.map(\.deviceID)))
            #expect(try await mirrors().map(\.device) == ordered)
            #expect(try await mirrors().allSatisfy { $0.user == nil && $0.state == "available" })
            // Three transactions, of 3, 3 and 1 devices: the rows one transaction inserted share its xmin
            // (read before the worker updates them).
            let batches = try await database.withClient { client in
                try await client.query(
                    "SELECT count(*)::int FROM jobs WHERE kind = \(InstallationMirror.kind) GROUP BY xmin::text ORDER BY min(id)"
                ).collect().map { try $0.decode(Int.self) }
            }
            #expect(batches == [3, 3, 1])
            // The jobs `InstallationMirror.enqueue` makes: JSONEncoder's arguments, its attempts, no key.
            for device in ordered {
                let args = String(decoding: try JSONEncoder().encode(InstallationMirror.Args(deviceID: device)), as: UTF8.self)
                let matching = try await database.withClient { client in
                    try await client.query(
                        """
                        SELECT count(*)::int FROM jobs
                        WHERE kind = \(InstallationMirror.kind) AND args = \(args)::jsonb AND max_attempts = \(InstallationMirror.maxAttempts)
                          AND unique_key IS NULL
                        """
                    ).collect().map { try $0.decode(Int.self) }
                }
                #expect(matching == [1], "\(device)")
            }

            try await runMirrors(hubs, base: base)
            let expected = Dictionary(
                uniqueKeysWithValues: registered.indices.map { index in
                    (
                        registered[index].deviceID,
                        LocalNotificationHubs.Installation(
                            installationId: registered[index].deviceID, platform: index.isMultiple(of: 2) ? "apns" : "fcmv1",
                            pushChannel: tokens[index], tags: [Self.tag(registered[index].userID)])
                    )
                })
            #expect(hubs.installations.withLockedValue { $0 } == expected)

            // Again, in one batch of the default size: seven more mirrors, and the hub as it was.
            #expect(try await Commands.pushMirrorInstallations(environment: environment) == 7)
            #expect(try await mirrors().count == 14)
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { $0 } == expected)
            #expect(try await mirrors().allSatisfy { $0.state == "completed" })
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a change that does not commit enqueues nothing: the mirror is in the change's transaction")
    func rolledBack() async throws {
        let learner = try await Learner.make(database: database)
        // Refused at COMMIT, after the registration's statements and its enqueue have all run.
        try await database.withClient { client in
            _ = try await client.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE FUNCTION test_refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN RAISE EXCEPTION 'refused at commit'; END $$
                        """))
            _ = try await client.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE CONSTRAINT TRIGGER test_refuse_commit AFTER INSERT ON push_tokens
                        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_refuse_commit()
                        """))
        }
        let hubs = LocalNotificationHubs()
        let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: "https://localhost:1"))
        try await app.live { client in
            let body = PushRegistrationTests.body(PushRegistrationTests.fcmToken("aiko-phone-1"), device: learner.deviceID)
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status != .noContent)
            #expect(try await PushRegistrationTests.rows(in: database).isEmpty)
            #expect(try await mirrors().isEmpty)
            try await database.withClient { client in
                _ = try await client.query(PostgresQuery(unsafeSQL: "DROP TRIGGER test_refuse_commit ON push_tokens"))
            }
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status == .noContent)
            #expect(try await mirrors().map(\.device) == [learner.deviceID])
        }
    }

    @Test("on the hub's route a due recall is one tag send per platform the learner has, recorded per platform; a throttled platform alone is sent again")
    func recallByTag() async throws {
        let hubs = LocalNotificationHubs(operation: { operation, attempt in
            operation.hasPrefix("POST fcmv1 tags ") && attempt == 1 ? .refuse(status: 429, reason: "throttled", retryAfter: 1) : .accept
        })
        try await serveLocally(hubs.router, tls: tls) { base in
            let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: base))
            // A phone (APNs) and a tablet (FCM) of one learner.
            let devices = try await app.live { client in try await RecallDeliveryTests(database: database).twoDevices(client, database: database) }
            let learner = devices.phone, tag = Self.tag(devices.userID)
            let phone = "phone-\(devices.userID.uuidString.prefix(8))", tablet = "tablet-\(devices.userID.uuidString.prefix(8))"
            try await runMirrors(hubs, base: base)
            #expect(hubs.installations.withLockedValue { Set($0.keys) } == [phone, tablet])

            let recallID = try await JobWorkerFaultTests().dueRecall(database, learner: learner, tokens: [])
            let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 2)), timeout: .seconds(10))
            let delivery = RecallDelivery(
                database: pool, senders: PushSenders(hubClient: try hubClient(hubs, base: base)), deepLinkBase: "learnapp://", pushConcurrency: 4,
                logger: TestEnvironment.quietLogger)
            var configuration = JobRuntimeConfiguration(concurrency: 4, pollInterval: .milliseconds(100), lease: .seconds(30), drain: .seconds(2))
            configuration.backoff = Backoff(base: .milliseconds(20), cap: .milliseconds(200))
            let worker = JobWorker(
                database: pool, databaseURL: database, handlers: delivery.handlers, configuration: configuration, logger: TestEnvironment.quietLogger)
            try await Commands.withDatabase(pool.client) { _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await worker.run() }
                    defer { worker.stop() }
                    let delivered = try await eventually(within: .seconds(20)) {
                        try await database.withClient { client in
                            for try await state in try await client.query(
                                "SELECT state FROM jobs WHERE kind = \(RecallDelivery.deliverKind) AND user_id = \(learner.id)"
                            ).decode(String.self) { return state == "completed" }
                            return false
                        }
                    }
                    #expect(delivered)
                }
            }
            let sends = hubs.tagSends.withLockedValue { $0 }
            // apple once, fcmv1 twice (429 first): no send per device, and the accepted apple one is not repeated.
            #expect(sends.map(\.format).sorted() == ["apple", "fcmv1"])
            #expect(sends.allSatisfy { $0.tags == tag })
            #expect(sends.first { $0.format == "apple" }?.reached == [phone])
            #expect(sends.first { $0.format == "fcmv1" }?.reached == [tablet])
            #expect(sends.allSatisfy { $0.payload.contains(recallID.uuidString.lowercased()) })
            #expect(hubs.received.withLockedValue { $0.isEmpty }, "a direct send on the tag route")
            try await database.withClient { client in
                var outcomes: [String: Int] = [:]
                for try await (outcome, attempts) in try await client.query(
                    "SELECT outcome, attempts FROM recall_pushes WHERE recall_id = \(recallID) AND user_id = \(learner.id) ORDER BY provider"
                ).decode((String, Int).self) { outcomes[outcome, default: 0] += attempts }
                #expect(outcomes == ["accepted": 3], "apple accepted at once, fcmv1 on its second attempt")
                for try await status in try await client.query(
                    "SELECT status FROM recalls WHERE id = \(recallID) AND user_id = \(learner.id)"
                ).decode(String.self) { #expect(status == "sent") }
            }
        }
    }

    @Test("the direct route enqueues no mirror, whatever changes")
    func directRoute() async throws {
        let learner = try await Learner.make(database: database)
        let app = try await makeTestApp(database: database, environment: ["BFF_JOBS_CONCURRENCY": "0"])
        try await app.live { client in
            let body = PushRegistrationTests.body(PushRegistrationTests.fcmToken("aiko-phone-1"), device: learner.deviceID)
            let answer2 = try await client.call(.post, "/api/v1/push/register", as: learner, json: body)
            #expect(answer2.status == .noContent)
            let answer3 = try await client.call(.post, "/api/v1/auth/logout", as: learner)
            #expect(answer3.status == .noContent)
        }
        #expect(try await mirrors().isEmpty)
    }

    @Test("a hub answering 429 with Retry-After, then 200, ends with the installation, on the second attempt")
    func throttled() async throws {
        let learner = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs(operation: { operation, attempt in
            operation.hasPrefix("PUT") && attempt == 1 ? .refuse(status: 429, reason: "throttled", retryAfter: 1) : .accept
        })
        try await serveLocally(hubs.router, tls: tls) { base in
            let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: base))
            try await app.live { client in
                let fcm = PushRegistrationTests.fcmToken("aiko-phone-1")
                #expect(
                    try await client.call(.post, "/api/v1/push/register", as: learner, json: PushRegistrationTests.body(fcm, device: learner.deviceID))
                        .status == .noContent)
                let started = ContinuousClock.now
                try await runMirrors(hubs, base: base)
                // The hub asked for a second; the runtime's own backoff here is 20 ms.
                #expect(ContinuousClock.now - started >= .seconds(1))
                #expect(hubs.installations.withLockedValue { $0[learner.deviceID]?.pushChannel } == fcm)
                let mirror = try #require(try await mirrors().first)
                #expect(mirror.state == "completed" && mirror.attempt == 2, "\(mirror)")
            }
        }
    }

    @Test("a hub refusing our key (401) dead-letters the mirror at once, naming the configuration")
    func refusedKey() async throws {
        let learner = try await Learner.make(database: database)
        let hubs = LocalNotificationHubs()
        try await withHubApp(hubs) { base, client in
            let body = PushRegistrationTests.body(PushRegistrationTests.fcmToken("aiko-phone-1"), device: learner.deviceID)
            #expect(try await client.call(.post, "/api/v1/push/register", as: learner, json: body).status == .noContent)
            try await runMirrors(hubs, base: base, key: Data(repeating: 7, count: 32).base64EncodedString())
            let mirror = try #require(try await mirrors().first)
            #expect(mirror.state == "dead" && mirror.attempt == 1, "\(mirror)")
            #expect(mirror.error?.contains("configuration: 401") == true, "\(mirror)")
            #expect(hubs.installations.withLockedValue { $0 }.isEmpty)
        }
    }

    @Test("a recall's tag send per platform reaches the learner's installations of that platform, and no one else's")
    func tagSend() async throws {
        let other = try await Learner.make(database: database)
        let (userID, devices, learners) = try await signedInOnTwoDevices("phone", "tablet")
        let (phone, tablet) = (learners[0], learners[1])
        let hubs = LocalNotificationHubs()
        try await serveLocally(hubs.router, tls: tls) { base in
            let app = try await makeTestApp(database: database, environment: hubEnvironment(hubs, base: base))
            try await app.live { client in
                let registrations = [
                    (phone, PushRegistrationTests.body(PushRegistrationTests.apnsToken, device: devices[0])),
                    (tablet, PushRegistrationTests.body(PushRegistrationTests.fcmToken("tablet-\(userID)"), device: devices[1], platform: "android")),
                    (other, PushRegistrationTests.body(PushRegistrationTests.fcmToken("other-\(other.id)"), device: other.deviceID, platform: "android")),
                ]
                for (learner, body) in registrations {
                    let answer4 = try await client.call(.post, "/api/v1/push/register", as: learner, json: body)
                    #expect(answer4.status == .noContent)
                }
            }
            try await runMirrors(hubs, base: base)
            let pool = Database(client: PostgresClient(configuration: database.clientConfiguration(poolSize: 1)), timeout: .seconds(10))
            let platforms = try await Commands.withDatabase(pool.client) { _ in try await PushTokenStore(database: pool).platforms(userID: userID) }
            #expect(platforms == [.apns, .fcmv1])
            let hub = try hubClient(hubs, base: base)
            let message = NotificationHubsSenderTests.message
            for platform in platforms {
                #expect(await hub.sendRecall(message, toUser: userID, platform: platform) == .sent)
            }
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
        #expect(hubs.tagSends.withLockedValue { $0 }.map(\.reached) == [[devices[0]], [devices[1]]])
        #expect(hubs.tagSends.withLockedValue { $0 }.map(\.format) == ["apple", "fcmv1"])
    }
}
