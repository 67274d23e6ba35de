import AsyncHTTPClient
import Foundation
import NIOCore
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The Notification Hubs stand-in refuses what the hub's REST API documents it refuses.
@Suite("Local Notification Hubs checks as Azure does", .timeLimit(.minutes(3)))
struct LocalNotificationHubsTests {
    static let apnsHandle = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    struct Case: Sendable {
        var query = "?direct&api-version=\(NotificationHubsSender.apiVersion)"
        var headers: [(String, String)]
        var body: String
    }

    /// A direct send as the sender makes it, changed by `name`; and the hub's status.
    static func request(_ name: String, _ hubs: LocalNotificationHubs, base: String) -> (Case, Int) {
        let resource = "\(base)/\(hubs.hub)"
        let expiry = Date().addingTimeInterval(600)
        func sas(resource: String = resource, key: String = hubs.key, keyName: String = hubs.keyName, expiry: Date = expiry) -> String {
            NotificationHubsSender.sasToken(resource: resource, keyName: keyName, key: key, expiry: expiry)
        }
        let message = NotificationHubsSenderTests.message
        let apple = Case(
            headers: [
                ("authorization", sas()), ("content-type", "application/json;charset=utf-8"), ("servicebusnotification-format", "apple"),
                ("servicebusnotification-devicehandle", apnsHandle), ("apns-push-type", "alert"), ("apns-priority", "10"),
            ],
            body: String(buffer: APNsSender.payload(message)))
        var fcm = apple
        fcm.headers = [
            ("authorization", sas()), ("content-type", "application/json;charset=utf-8"), ("servicebusnotification-format", "fcmv1"),
            ("servicebusnotification-devicehandle", NotificationHubsSenderTests.fcm.token),
        ]
        fcm.body = String(buffer: FCMSender.payload(message, token: nil))
        func header(_ base: Case, _ name: String, _ value: String?) -> Case {
            var changed = base
            changed.headers.removeAll { $0.0 == name }
            if let value { changed.headers.append((name, value)) }
            return changed
        }
        var changed = apple
        switch name {
        case "valid apple": return (apple, 201)
        case "valid fcmv1": return (fcm, 201)
        case "no SAS token": return (header(apple, "authorization", nil), 401)
        case "another key's signature":
            return (header(apple, "authorization", sas(key: Data(repeating: 7, count: 32).base64EncodedString())), 401)
        case "expired": return (header(apple, "authorization", sas(expiry: Date().addingTimeInterval(-60))), 401)
        case "unknown key name": return (header(apple, "authorization", sas(keyName: "Listen")), 401)
        case "another hub's URI": return (header(apple, "authorization", sas(resource: "\(base)/other-hub")), 401)
        case "signature altered":
            return (header(apple, "authorization", sas().replacingOccurrences(of: "&se=", with: "x&se=")), 401)
        case "no api-version":
            changed.query = "?direct"
            return (changed, 400)
        case "unknown api-version":
            changed.query = "?direct&api-version=1999-01"
            return (changed, 400)
        case "not direct":
            changed.query = "?api-version=\(NotificationHubsSender.apiVersion)"
            return (changed, 400)
        case "text/plain": return (header(apple, "content-type", "text/plain"), 400)
        case "format gcm": return (header(apple, "servicebusnotification-format", "gcm"), 400)
        case "no device handle": return (header(apple, "servicebusnotification-devicehandle", nil), 400)
        case "apple without aps":
            changed.body = #"{"alert":"x"}"#
            return (changed, 400)
        case "apple push type banner": return (header(apple, "apns-push-type", "banner"), 400)
        case "apple priority 7": return (header(apple, "apns-priority", "7"), 400)
        case "fcmv1 with its own token":
            changed = fcm
            changed.body = String(buffer: FCMSender.payload(message, token: "someone-else"))
            return (changed, 400)
        case "fcmv1 with a number in data":
            changed = fcm
            changed.body = fcm.body.replacingOccurrences(of: #""data":{"#, with: #""data":{"count":3,"#)
            return (changed, 400)
        case "fcmv1 with an unknown field":
            changed = fcm
            changed.body = fcm.body.replacingOccurrences(of: #"{"message":{"#, with: #"{"message":{"to":"x","#)
            return (changed, 400)
        default: return (changed, 0)
        }
    }

    @Test(
        "each direct send the hub refuses is refused with its status",
        arguments: [
            "valid apple", "valid fcmv1", "no SAS token", "another key's signature", "expired", "unknown key name", "another hub's URI",
            "signature altered", "no api-version", "unknown api-version", "not direct", "text/plain", "format gcm", "no device handle",
            "apple without aps", "apple push type banner", "apple priority 7", "fcmv1 with its own token", "fcmv1 with a number in data",
            "fcmv1 with an unknown field",
        ])
    func refusals(_ name: String) async throws {
        let hubs = LocalNotificationHubs()
        let http = try OutboundHTTP.client(extraCAFile: tls.certificatePath)
        let (answer, status) = try await serveLocally(hubs.router, tls: tls) { base in
            let (request, status) = Self.request(name, hubs, base: base)
            return (try await StandInRequests.post("\(base)/\(hubs.hub)/messages/\(request.query)", headers: request.headers, body: request.body, http: http), status)
        }
        #expect(answer.status == status, "\(name): \(hubs.violations.withLockedValue { $0 })")
        #expect(hubs.received.withLockedValue { $0.count } == (status == 201 ? 1 : 0))
    }
}
