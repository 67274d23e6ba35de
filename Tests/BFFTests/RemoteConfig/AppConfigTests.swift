import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import BFF
@testable import BFFPlatform

/// The remote app configuration, maintenance mode, the forced update and `X-Client`.
@Suite("App configuration, maintenance and forced update", .needsDatabase, .timeLimit(.minutes(3)))
struct AppConfigTests {
    let database: DatabaseURL
    let directory: URL

    init() async throws {
        database = try await TestDatabases.shared.makeMigrated()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("app-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    static let config = """
        {"platforms": {"ios": {"min_supported_version": "1.2.0", "latest_version": "1.4.0"}, "android": {"latest_version": "1.3.1"}},
         "maintenance": {"active": false, "message": null, "until": null},
         "features": {"instant_question": true,
                      "external_purchase_link": {"default": false, "regions": {"US": true}, "platforms": {"android": false}, "min_version": "1.3.0"}}}
        """

    func write(_ text: String, to name: String = "app-config.json") throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        return path
    }

    static let xClient = HTTPField.Name("X-Client")!

    @Test("versions, parsed strictly; X-Client, read leniently")
    func parsing() {
        #expect(AppVersion("1.4.0")?.parts == [1, 4, 0] && AppVersion("0.0.1") != nil && AppVersion("10.20.300") != nil)
        for bad in ["1", "1.2", "1.2.3.4", "01.2.0", "1.02.0", "1.2.x", "", " 1.2.3", "1.2.3 ", String(repeating: "1", count: 300), "1..2", "-1.2.3"] {
            #expect(AppVersion(bad) == nil, "\(bad)")
        }
        #expect(AppVersion("1.10.0")! > AppVersion("1.9.9")!)
        let full = ClientIdentity(header: "LearnApp/1.4.0 (iOS 17.5; iPhone15,2)")
        #expect(full == ClientIdentity(version: AppVersion("1.4.0"), platform: .ios, osVersion: "17.5", model: "iPhone15,2"))
        let android = ClientIdentity(header: "LearnApp/2.0.1 (Android 14; Pixel 8 Pro)")
        #expect(android?.platform == .android && android?.model == "Pixel 8 Pro" && android?.version?.description == "2.0.1")
        #expect(ClientIdentity(header: "LearnApp/1 (iOS 17.5; iPhone)")?.version == nil)
        #expect(ClientIdentity(header: "LearnApp/1.4.0")?.platform == nil)
        #expect(ClientIdentity(header: "garbage") == nil && ClientIdentity(header: nil) == nil && ClientIdentity(header: "") == nil)
        #expect(ClientIdentity(header: String(repeating: "x", count: 600)) == nil)
        #expect(ClientIdentity(header: "App/1.0.0 (Windows 11; PC)")?.platform == nil)
    }

    @Test("the file: every key checked, unknown keys refused, and at start-up an invalid one names the variable")
    func fileValidation() throws {
        #expect(throws: Never.self) { try RemoteConfig(json: Data(Self.config.utf8)) }
        #expect(throws: Never.self) { try RemoteConfig(json: Data("{}".utf8)) }
        for bad in [
            #"{"platform": {}}"#, #"{"platforms": {"windows": {}}}"#, #"{"platforms": {"ios": {"min_version": "1.0.0"}}}"#,
            #"{"platforms": {"ios": {"min_supported_version": "1.0"}}}"#, #"{"maintenance": {"active": "yes"}}"#,
            #"{"maintenance": {"active": 1}}"#, #"{"maintenance": {"until": "tomorrow"}}"#, #"{"features": {"x": 1}}"#,
            #"{"features": {"x": {"default": true, "regions": {"jp": true}}}}"#, #"{"features": {"x": {"defualt": true}}}"#,
            #"{"features": {"Bad-Name": true}}"#, "[]", "not json",
        ] {
            #expect(throws: RemoteConfig.Invalid.self, "\(bad)") { try RemoteConfig(json: Data(bad.utf8)) }
        }
        let broken = try write("{\"features\": {\"x\": 3}}", to: "broken.json")
        let error = #expect(throws: ConfigurationError.self) { try RemoteConfigSource(path: broken, logger: TestEnvironment.quietLogger) }
        #expect(error?.variable == "BFF_APP_CONFIG_FILE")
        #expect(throws: ConfigurationError.self) { try RemoteConfigSource(path: directory.appendingPathComponent("missing.json").path, logger: TestEnvironment.quietLogger) }
    }

    @Test("GET /app-config: versions, update_required, flags by platform, version and region; ETag and 304; bad parameters 422")
    func appConfig() async throws {
        let path = try write(Self.config)
        let app = try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path])
        try await app.live { client in
            let old = try await client.execute(uri: "/api/v1/app-config?platform=ios&app_version=1.1.9&region=JP", method: .get)
            #expect(old.status == .ok, "\(old.text)")
            #expect(old.json["min_supported_version"] as? String == "1.2.0" && old.json["latest_version"] as? String == "1.4.0")
            #expect(old.json["update_required"] as? Bool == true)
            #expect(old.headers[.cacheControl] == "max-age=60")
            #expect(old.json["features"] as? [String: Bool] == ["instant_question": true, "external_purchase_link": false])
            let us = try await client.execute(uri: "/api/v1/app-config?platform=ios&app_version=1.3.0&region=US", method: .get)
            #expect(us.json["update_required"] as? Bool == false)
            #expect((us.json["features"] as? [String: Bool])?["external_purchase_link"] == true)
            let androidUS = try await client.execute(uri: "/api/v1/app-config?platform=android&app_version=1.3.0&region=US", method: .get)
            #expect((androidUS.json["features"] as? [String: Bool])?["external_purchase_link"] == true, "the region refines the platform")
            let androidJP = try await client.execute(uri: "/api/v1/app-config?platform=android&app_version=1.3.0&region=JP", method: .get)
            #expect((androidJP.json["features"] as? [String: Bool])?["external_purchase_link"] == false)
            #expect(androidJP.json["min_supported_version"] == nil || androidJP.json["min_supported_version"] is NSNull)
            let noVersion = try await client.execute(uri: "/api/v1/app-config?platform=ios&region=US", method: .get)
            #expect(noVersion.json["update_required"] as? Bool == false)
            #expect((noVersion.json["features"] as? [String: Bool])?["external_purchase_link"] == false, "min_version needs a known version")

            let tag = try #require(us.headers[.eTag])
            #expect(tag != old.headers[.eTag] && tag != androidUS.headers[.eTag])
            let same = try await client.execute(uri: "/api/v1/app-config?platform=ios&app_version=1.3.0&region=US", method: .get, headers: [.ifNoneMatch: tag])
            #expect(same.status == .notModified && same.headers[.eTag] == tag && same.body.readableBytes == 0)
            let listed = try await client.execute(
                uri: "/api/v1/app-config?platform=ios&app_version=1.3.0&region=US", method: .get, headers: [.ifNoneMatch: "\"other\", W/\(tag)"])
            #expect(listed.status == .notModified)
            for garbage in ["garbage", "\"", "W/", String(repeating: ",", count: 500)] {
                let answer = try await client.execute(
                    uri: "/api/v1/app-config?platform=ios&app_version=1.3.0&region=US", method: .get, headers: [.ifNoneMatch: garbage])
                #expect(answer.status == .ok, "\(garbage)")
            }
            for query in [
                "platform=windows", "", "platform=ios&app_version=1", "platform=ios&app_version=1.2.3.4", "platform=ios&app_version=01.2.0", "platform=ios&region=jp",
                "platform=ios&app_version=\(String(repeating: "9", count: 300))",
            ] {
                let refused = try await client.execute(uri: "/api/v1/app-config?\(query)", method: .get)
                #expect(refused.status == .unprocessableContent && refused.errorCode == "validation_failed", "\(query): \(refused.status)")
            }
        }
    }

    @Test("maintenance: every operation but the open ones is 503 maintenance with Retry-After and the message")
    func maintenance() async throws {
        let learner = try await Learner.make(database: database)
        let until = Date().addingTimeInterval(120)
        let path = try write(#"{"maintenance": {"active": true, "message": "メンテナンス中です", "until": "\#(try RFC3339Dates().encode(until))"}}"#)
        let app = try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path])
        try await app.live { client in
            let refused = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect(refused.status == .serviceUnavailable && refused.errorCode == "maintenance", "\(refused.text)")
            #expect(refused.json["message"] as? String == "メンテナンス中です")
            let retry = Int(refused.headers[.retryAfter] ?? "") ?? 0
            #expect((115...121).contains(retry), "Retry-After \(retry)")
            #expect(try await client.execute(uri: "/api/v1/auth/start?device_id=x", method: .get).errorCode == "maintenance")
            let config = try await client.execute(uri: "/api/v1/app-config?platform=ios", method: .get)
            #expect(config.status == .ok && (config.json["maintenance"] as? [String: Any])?["active"] as? Bool == true)
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            // Revocations from the IdP and RevenueCat's purchases are never turned away.
            let logout = try await client.execute(
                uri: "/api/v1/auth/backchannel-logout", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: "logout_token=x"))
            #expect(logout.errorCode != "maintenance")
            let webhook = try await client.execute(
                uri: RevenueCatInbox.path, method: .post, headers: [.contentType: "application/json", .authorization: "x"], body: ByteBuffer(string: "{}"))
            #expect(webhook.errorCode != "maintenance")
        }
        // Without an end: Retry-After 300; an end that has passed: maintenance is over.
        _ = try write(#"{"maintenance": {"active": true}}"#)
        try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path]).live { client in
            let refused = try await client.call(.get, "/api/v1/chats", as: learner)
            #expect(refused.errorCode == "maintenance" && refused.headers[.retryAfter] == "300")
        }
        _ = try write(#"{"maintenance": {"active": true, "until": "2020-01-01T00:00:00Z"}}"#)
        try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path]).live { client async throws in
            #expect(try await client.call(.get, "/api/v1/chats", as: learner).status == .ok)
        }
    }

    @Test("forced update: an app below its platform's minimum is 426 except for the login and the configuration; unreadable X-Client is served; the device keeps what X-Client says")
    func forcedUpdate() async throws {
        let learner = try await Learner.make(database: database)
        let path = try write(Self.config)
        let app = try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path])
        try await app.live { client in
            let old: HTTPFields = [Self.xClient: "LearnApp/1.1.9 (iOS 17.5; iPhone15,2)"]
            let refused = try await client.call(.get, "/api/v1/chats", as: learner, headers: old)
            #expect(refused.status.code == 426 && refused.errorCode == "upgrade_required", "\(refused.text)")
            #expect(refused.json["message"] as? String == "バージョン 1.1.9 はサポートを終了しました。ストアから 1.2.0 以降に更新してください。")
            #expect(try await client.execute(uri: "/api/v1/app-config?platform=ios&app_version=1.1.9", method: .get, headers: old).status == .ok)
            #expect(try await client.execute(uri: "/api/v1/auth/start?device_id=x", method: .get, headers: old).status.code != 426)
            // Android has no minimum; unreadable or absent headers are served.
            for header in ["LearnApp/1.0.0 (Android 14; Pixel 8)", "LearnApp/1 (iOS 17.5; iPhone)", "garbage", String(repeating: "v", count: 300), "LearnApp/1.2.0"] {
                #expect(try await client.call(.get, "/api/v1/chats", as: learner, headers: [Self.xClient: header]).status == .ok, "\(header)")
            }
            #expect(try await client.call(.get, "/api/v1/chats", as: learner).status == .ok)

            // A device's first call is recorded at once, later ones at most once a minute.
            let newcomer = try await Learner.make(database: database)
            let current: HTTPFields = [Self.xClient: "LearnApp/1.4.0 (iOS 17.5; iPhone15,2)"]
            #expect(try await client.call(.get, "/api/v1/chats", as: newcomer, headers: current).status == .ok)
            #expect(
                try await eventually {
                    let devices = try await client.call(.get, "/api/v1/devices", as: newcomer).json["items"] as? [[String: Any]]
                    let mine = devices?.first { $0["device_id"] as? String == newcomer.deviceID }
                    return mine?["model"] as? String == "iPhone15,2" && mine?["os_version"] as? String == "17.5" && mine?["app_version"] as? String == "1.4.0"
                })
            #expect(try await client.call(.get, "/api/v1/chats", as: newcomer, headers: [Self.xClient: "LearnApp/1.4.1 (iOS 17.6; iPhone15,2)"]).status == .ok)
            try await Task.sleep(for: .milliseconds(300))
            let devices = try await client.call(.get, "/api/v1/devices", as: newcomer).json["items"] as? [[String: Any]]
            #expect(devices?.first?["app_version"] as? String == "1.4.0", "written again within the minute")
            let metrics = scrapeMetrics()
            #expect(metrics.contains(#"bff_client_requests_total{platform="ios",app_version="1.4.0"}"#) || metrics.contains(#"bff_client_requests_total{app_version="1.4.0",platform="ios"}"#))
        }
    }

    @Test("the file is re-read when it changes; a change that does not parse keeps the last good configuration")
    func reload() async throws {
        let path = try write(Self.config)
        let logs = LogCapture()
        let app = try await makeTestApp(database: database, environment: ["BFF_APP_CONFIG_FILE": path], logs: logs)
        try await app.live { client in
            @Sendable func latest() async throws -> String? {
                try await client.execute(uri: "/api/v1/app-config?platform=ios", method: .get).json["latest_version"] as? String
            }
            #expect(try await latest() == "1.4.0")
            _ = try write(Self.config.replacingOccurrences(of: "1.4.0", with: "1.5.0"))
            #expect(try await eventually(within: .seconds(5), every: .milliseconds(100)) { try await latest() == "1.5.0" })
            _ = try write("{\"platforms\": {\"ios\": {\"latest_version\": \"one\"}}}")
            try await Task.sleep(for: .milliseconds(1_300))
            #expect(try await latest() == "1.5.0")
            // Said once (`bff_app_config_valid` goes to 0 too: one gauge per process, which the suites' apps share).
            #expect(logs.all.filter { $0.contains("app configuration file is invalid") }.count == 1)
            _ = try write(Self.config.replacingOccurrences(of: "1.4.0", with: "1.6.0"))
            #expect(try await eventually(within: .seconds(5), every: .milliseconds(100)) { try await latest() == "1.6.0" })
        }
    }
}
