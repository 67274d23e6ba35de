import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The Notification Hubs stand-in's installations and tag sends refuse what the hub's REST API
/// documents it refuses, each with its status, and change nothing when they do.
@Suite("Local Notification Hubs: installations and tag sends", .timeLimit(.minutes(3)))
struct LocalHubInstallationTests {
    static let device = "device-1234abcd"
    static let apnsToken = LocalNotificationHubsTests.apnsHandle
    static let fcmToken = NotificationHubsSenderTests.fcm.token
    static let userTag = "user:0f8fad5b-d9cb-469f-a165-70867728950e"
    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    struct Case: Sendable {
        var method: HTTPMethod
        var path: String
        var query = "?api-version=\(NotificationHubsSender.apiVersion)"
        var headers: [(String, String)]
        var body: String?
    }

    static func installation(_ members: [String: Any]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: members, options: [.sortedKeys]), as: UTF8.self)
    }

    static var fcmInstallation: [String: Any] { ["installationId": device, "platform": "fcmv1", "pushChannel": fcmToken, "tags": [userTag]] }

    /// A request as the client makes it, changed by `name`; and the hub's status.
    static func request(_ name: String, _ hubs: LocalNotificationHubs, base: String) -> (Case, Int) {
        let resource = "\(base)/\(hubs.hub)"
        func sas(resource: String = resource, expiry: Date = Date().addingTimeInterval(600)) -> String {
            NotificationHubsSender.sasToken(resource: resource, keyName: hubs.keyName, key: hubs.key, expiry: expiry)
        }
        let put = Case(
            method: .PUT, path: "/\(hubs.hub)/installations/\(device)",
            headers: [("authorization", sas()), ("content-type", "application/json")], body: installation(fcmInstallation))
        func with(_ change: (inout [String: Any]) -> Void) -> Case {
            var members = fcmInstallation
            change(&members)
            var changed = put
            changed.body = installation(members)
            return changed
        }
        func header(_ base: Case, _ name: String, _ value: String?) -> Case {
            var changed = base
            changed.headers.removeAll { $0.0 == name }
            if let value { changed.headers.append((name, value)) }
            return changed
        }
        let message = NotificationHubsSenderTests.message
        let apple = Case(
            method: .POST, path: "/\(hubs.hub)/messages/",
            headers: [
                ("authorization", sas()), ("content-type", "application/json;charset=utf-8"), ("servicebusnotification-format", "apple"),
                ("servicebusnotification-tags", userTag), ("apns-push-type", "alert"), ("apns-priority", "10"),
            ],
            body: String(buffer: APNsSender.payload(message)))
        var fcm = header(apple, "servicebusnotification-format", "fcmv1")
        fcm.headers.removeAll { $0.0.hasPrefix("apns-") }
        fcm.body = String(buffer: FCMSender.payload(message, token: nil))
        let delete = Case(method: .DELETE, path: "/\(hubs.hub)/installations/\(device)", headers: [("authorization", sas())], body: nil)
        var changed = put
        switch name {
        // Installations: PUT.
        case "valid fcmv1 installation": return (put, 201)
        case "valid apns installation":
            return (
                with {
                    $0["platform"] = "apns"; $0["pushChannel"] = apnsToken
                }, 201
            )
        case "platform in capitals":
            return (
                with {
                    $0["platform"] = "APNS"; $0["pushChannel"] = apnsToken
                }, 201
            )
        case "no SAS token": return (header(put, "authorization", nil), 401)
        case "expired SAS token": return (header(put, "authorization", sas(expiry: Date().addingTimeInterval(-60))), 401)
        case "another hub's SAS token": return (header(put, "authorization", sas(resource: "\(base)/other-hub")), 401)
        case "another hub":
            changed.path = "/other-hub/installations/\(device)"
            return (changed, 404)
        case "no api-version":
            changed.query = ""
            return (changed, 400)
        case "unknown api-version":
            changed.query = "?api-version=1999-01"
            return (changed, 400)
        case "text/plain": return (header(put, "content-type", "text/plain"), 400)
        case "latin-1": return (header(put, "content-type", "application/json;charset=iso-8859-1"), 400)
        case "not JSON":
            changed.body = "installationId=\(device)"
            return (changed, 400)
        case "a JSON array":
            changed.body = "[\(installation(fcmInstallation))]"
            return (changed, 400)
        case "no installationId": return (with { $0["installationId"] = nil }, 400)
        case "installationId of another device": return (with { $0["installationId"] = "device-other-1" }, 400)
        case "installationId a number": return (with { $0["installationId"] = 7 }, 400)
        case "no platform": return (with { $0["platform"] = nil }, 400)
        case "platform fcm": return (with { $0["platform"] = "fcm" }, 400)
        case "platform a number": return (with { $0["platform"] = 1 }, 400)
        case "no pushChannel": return (with { $0["pushChannel"] = nil }, 400)
        case "empty pushChannel": return (with { $0["pushChannel"] = "" }, 400)
        case "pushChannel a number": return (with { $0["pushChannel"] = 42 }, 400)
        case "apns pushChannel not hexadecimal": return (with { $0["platform"] = "apns" }, 400)
        case "tags a string": return (with { $0["tags"] = userTag }, 400)
        case "a tag a number": return (with { $0["tags"] = [userTag, 3] }, 400)
        case "a tag with a space": return (with { $0["tags"] = ["user 1"] }, 400)
        case "a tag of 121 characters": return (with { $0["tags"] = [String(repeating: "t", count: 121)] }, 400)
        case "an empty tag": return (with { $0["tags"] = [""] }, 400)
        case "61 tags": return (with { $0["tags"] = (0..<61).map { "tag-\($0)" } }, 400)
        case "60 tags": return (with { $0["tags"] = (0..<60).map { "tag-\($0)" } }, 201)
        case "an unknown member": return (with { $0["deviceToken"] = fcmToken }, 400)
        // Installations: DELETE.
        case "delete of none": return (delete, 204)
        case "delete without SAS token": return (header(delete, "authorization", nil), 401)
        case "delete with an unknown api-version":
            var unknown = delete
            unknown.query = "?api-version=2010-01"
            return (unknown, 400)
        // Tag sends.
        case "apple to a tag": return (apple, 201)
        case "fcmv1 to a tag": return (fcm, 201)
        case "fcmv1 to two tags ORed": return (header(fcm, "servicebusnotification-tags", "\(userTag) || user:other"), 201)
        case "a broadcast": return (header(apple, "servicebusnotification-tags", nil), 400)
        case "a device handle on a tag send": return (header(apple, "servicebusnotification-devicehandle", apnsToken), 400)
        case "21 tags ORed":
            return (header(apple, "servicebusnotification-tags", (0..<21).map { "user:\($0)" }.joined(separator: " || ")), 400)
        case "7 tags with AND":
            return (header(apple, "servicebusnotification-tags", (0..<7).map { "user:\($0)" }.joined(separator: " && ")), 400)
        case "a tag expression with a space in a tag": return (header(apple, "servicebusnotification-tags", "user 1"), 400)
        case "a negation": return (header(apple, "servicebusnotification-tags", "!\(userTag)"), 400)
        case "format template": return (header(apple, "servicebusnotification-format", "template"), 400)
        case "tag send without SAS token": return (header(fcm, "authorization", nil), 401)
        case "tag send as text/plain": return (header(fcm, "content-type", "text/plain"), 400)
        case "apple tag send without aps":
            changed = apple
            changed.body = #"{"alert":"x"}"#
            return (changed, 400)
        case "fcmv1 tag send with a token":
            changed = fcm
            changed.body = String(buffer: FCMSender.payload(message, token: fcmToken))
            return (changed, 400)
        default: return (changed, 0)
        }
    }

    static let cases = [
        "valid fcmv1 installation", "valid apns installation", "platform in capitals", "no SAS token", "expired SAS token",
        "another hub's SAS token", "another hub", "no api-version", "unknown api-version", "text/plain", "latin-1", "not JSON", "a JSON array",
        "no installationId", "installationId of another device", "installationId a number", "no platform", "platform fcm",
        "platform a number", "no pushChannel", "empty pushChannel", "pushChannel a number", "apns pushChannel not hexadecimal",
        "tags a string", "a tag a number", "a tag with a space", "a tag of 121 characters", "an empty tag", "61 tags", "60 tags",
        "an unknown member", "delete of none", "delete without SAS token", "delete with an unknown api-version", "apple to a tag",
        "fcmv1 to a tag", "fcmv1 to two tags ORed", "a broadcast", "a device handle on a tag send", "21 tags ORed", "7 tags with AND",
        "a tag expression with a space in a tag", "a negation", "format template", "tag send without SAS token", "tag send as text/plain",
        "apple tag send without aps", "fcmv1 tag send with a token",
    ]

    @Test("each installation request and tag send the hub refuses is refused with its status, and changes nothing", arguments: cases)
    func refusals(_ name: String) async throws {
        let hubs = LocalNotificationHubs()
        let http = try OutboundHTTP.client(extraCAFile: tls.certificatePath)
        let (answer, status, method) = try await serveLocally(hubs.router, tls: tls) { base in
            let (request, status) = Self.request(name, hubs, base: base)
            #expect(status != 0, "no case named \(name)")
            let answer = try await StandInRequests.send(
                request.method, "\(base)\(request.path)\(request.query)", headers: request.headers, body: request.body, http: http)
            return (answer, status, request.method)
        }
        #expect(answer.status == status, "\(name): \(hubs.violations.withLockedValue { $0 })")
        let accepted = (200..<300).contains(status)
        #expect(hubs.violations.withLockedValue { $0.isEmpty } == accepted, "\(name)")
        switch method {
        case .PUT: #expect(hubs.installations.withLockedValue { $0.count } == (accepted ? 1 : 0), "\(name)")
        case .POST: #expect(hubs.tagSends.withLockedValue { $0.count } == (accepted ? 1 : 0), "\(name)")
        default: #expect(hubs.installations.withLockedValue { $0.isEmpty })
        }
    }

    @Test("an installation is overwritten by a PUT (200), read back by GET, deleted by DELETE (204, and 204 again), then GET is 404")
    func lifecycle() async throws {
        let hubs = LocalNotificationHubs()
        let http = try OutboundHTTP.client(extraCAFile: tls.certificatePath)
        try await serveLocally(hubs.router, tls: tls) { base in
            let url = "\(base)/\(hubs.hub)/installations/\(Self.device)?api-version=\(NotificationHubsSender.apiVersion)"
            let auth = (
                "authorization",
                NotificationHubsSender.sasToken(
                    resource: "\(base)/\(hubs.hub)", keyName: hubs.keyName, key: hubs.key, expiry: Date().addingTimeInterval(600))
            )
            let json = ("content-type", "application/json")
            #expect(try await StandInRequests.send(.PUT, url, headers: [auth, json], body: Self.installation(Self.fcmInstallation), http: http).status == 201)
            var apns = Self.fcmInstallation
            apns["platform"] = "apns"
            apns["pushChannel"] = Self.apnsToken
            #expect(try await StandInRequests.send(.PUT, url, headers: [auth, json], body: Self.installation(apns), http: http).status == 200)
            let read = try await StandInRequests.send(.GET, url, headers: [auth], body: nil, http: http)
            #expect(read.status == 200)
            #expect(read.string("platform") == "apns" && read.string("pushChannel") == Self.apnsToken && read.string("installationId") == Self.device)
            #expect(try await StandInRequests.send(.DELETE, url, headers: [auth], body: nil, http: http).status == 204)
            #expect(try await StandInRequests.send(.DELETE, url, headers: [auth], body: nil, http: http).status == 204)
            #expect(try await StandInRequests.send(.GET, url, headers: [auth], body: nil, http: http).status == 404)
        }
        #expect(hubs.violations.withLockedValue { $0 }.isEmpty)
    }

    @Test("a tag send reaches the installations of its format's platform whose tags match, and no other")
    func reach() async throws {
        let hubs = LocalNotificationHubs()
        hubs.installations.withLockedValue {
            $0["phone-1234abcd"] = .init(installationId: "phone-1234abcd", platform: "apns", pushChannel: Self.apnsToken, tags: [Self.userTag])
            $0["tablet-1234abcd"] = .init(installationId: "tablet-1234abcd", platform: "fcmv1", pushChannel: Self.fcmToken, tags: [Self.userTag])
            $0["ipad-1234abcd"] = .init(installationId: "ipad-1234abcd", platform: "fcmv1", pushChannel: Self.fcmToken + "b", tags: [Self.userTag])
            $0["other-1234abcd"] = .init(installationId: "other-1234abcd", platform: "fcmv1", pushChannel: Self.fcmToken + "c", tags: ["user:other"])
        }
        let http = try OutboundHTTP.client(extraCAFile: tls.certificatePath)
        try await serveLocally(hubs.router, tls: tls) { base in
            for format in ["fcmv1", "apple"] {
                let (request, _) = Self.request(format == "apple" ? "apple to a tag" : "fcmv1 to a tag", hubs, base: base)
                let answer = try await StandInRequests.send(
                    request.method, "\(base)\(request.path)\(request.query)", headers: request.headers, body: request.body, http: http)
                #expect(answer.status == 201)
            }
        }
        let sends = hubs.tagSends.withLockedValue { $0 }
        #expect(sends.map(\.reached) == [["ipad-1234abcd", "tablet-1234abcd"], ["phone-1234abcd"]])
    }
}
