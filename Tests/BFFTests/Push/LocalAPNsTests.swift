import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import StandIns
import Testing

@testable import BFF
@testable import BFFPlatform

/// The APNs stand-in refuses what Apple documents APNs refuses, each with Apple's status and reason.
@Suite("Local APNs checks as Apple does", .timeLimit(.minutes(3)))
struct LocalAPNsTests {
    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    struct Case: Sendable {
        var providerToken: String?
        var headers: [(String, String)]
        var deviceToken: String
        var body: String
    }

    /// The request a valid sender makes, then changed by `name`; and Apple's answer (status, reason).
    static func request(_ name: String, _ apns: LocalAPNs) throws -> (Case, Int, String?) {
        let now = StandInRequests.now
        func token(header: String = #"{"alg":"ES256","kid":"\#(apns.keyID)"}"#, claims: String? = nil, key: P256.Signing.PrivateKey? = nil) throws -> String {
            try StandInRequests.jwt(
                header: header, claims: claims ?? #"{"iss":"\#(apns.teamID)","iat":\#(now)}"#, sign: StandInRequests.es256(key ?? apns.key))
        }
        let message = APNsSenderTests.message
        var valid = Case(
            providerToken: try token(),
            headers: [
                ("apns-topic", apns.topic), ("apns-push-type", "alert"), ("apns-priority", "10"),
                ("apns-expiration", String(Int64(message.expiresAt.timeIntervalSince1970))), ("apns-collapse-id", message.collapseID),
            ],
            deviceToken: APNsSenderTests.deviceToken, body: String(buffer: APNsSender.payload(message)))
        func header(_ name: String, _ value: String?) -> Case {
            var changed = valid
            changed.headers.removeAll { $0.0 == name }
            if let value { changed.headers.append((name, value)) }
            return changed
        }
        switch name {
        case "valid": return (valid, 200, nil)
        case "no provider token":
            valid.providerToken = nil
            return (valid, 403, "MissingProviderToken")
        case "string iat": return (Case(valid, token: try token(claims: #"{"iss":"\#(apns.teamID)","iat":"\#(now)"}"#)), 403, "InvalidProviderToken")
        case "fractional iat": return (Case(valid, token: try token(claims: #"{"iss":"\#(apns.teamID)","iat":\#(now).5}"#)), 403, "InvalidProviderToken")
        case "no iat": return (Case(valid, token: try token(claims: #"{"iss":"\#(apns.teamID)"}"#)), 403, "InvalidProviderToken")
        case "another team": return (Case(valid, token: try token(claims: #"{"iss":"OTHER12345","iat":\#(now)}"#)), 403, "InvalidProviderToken")
        case "no kid": return (Case(valid, token: try token(header: #"{"alg":"ES256"}"#)), 403, "InvalidProviderToken")
        case "alg RS256": return (Case(valid, token: try token(header: #"{"alg":"RS256","kid":"\#(apns.keyID)"}"#)), 403, "InvalidProviderToken")
        case "another key": return (Case(valid, token: try token(key: P256.Signing.PrivateKey())), 403, "InvalidProviderToken")
        case "older than an hour":
            return (Case(valid, token: try token(claims: #"{"iss":"\#(apns.teamID)","iat":\#(now - 3700)}"#)), 403, "ExpiredProviderToken")
        case "issued in the future":
            return (Case(valid, token: try token(claims: #"{"iss":"\#(apns.teamID)","iat":\#(now + 600)}"#)), 403, "InvalidProviderToken")
        case "no topic": return (header("apns-topic", nil), 400, "MissingTopic")
        case "another topic": return (header("apns-topic", "com.example.other"), 400, "BadTopic")
        case "no push type": return (header("apns-push-type", nil), 400, "InvalidPushType")
        case "push type banner": return (header("apns-push-type", "banner"), 400, "InvalidPushType")
        case "priority 7": return (header("apns-priority", "7"), 400, "BadPriority")
        case "expiration as a date": return (header("apns-expiration", "2030-01-01T00:00:00Z"), 400, "BadExpirationDate")
        case "collapse id of 65 bytes": return (header("apns-collapse-id", String(repeating: "c", count: 65)), 400, "BadCollapseId")
        case "apns-id not a UUID": return (header("apns-id", "push-1"), 400, "BadMessageId")
        case "topic twice":
            valid.headers.append(("apns-topic", apns.topic))
            return (valid, 400, "DuplicateHeaders")
        case "device token of 63 digits":
            valid.deviceToken = String(valid.deviceToken.dropLast())
            return (valid, 400, "BadDeviceToken")
        case "device token not hexadecimal":
            valid.deviceToken = String(valid.deviceToken.dropLast()) + "z"
            return (valid, 400, "BadDeviceToken")
        case "payload over 4096 bytes":
            valid.body = #"{"aps":{"alert":"x"},"pad":"\#(String(repeating: "p", count: 4096))"}"#
            return (valid, 413, "PayloadTooLarge")
        case "empty payload":
            valid.body = ""
            return (valid, 400, "PayloadEmpty")
        case "payload not an object":
            valid.body = #"["aps"]"#
            return (valid, 400, "PayloadEmpty")
        case "aps not a dictionary":
            valid.body = #"{"aps":"alert"}"#
            return (valid, 400, "PayloadEmpty")
        case "alert push with nothing to show":
            valid.body = #"{"aps":{"thread-id":"recall"}}"#
            return (valid, 400, "PayloadEmpty")
        default: throw TestSetupError("no case \(name)")
        }
    }

    @Test(
        "each request APNs refuses is refused with Apple's status and reason",
        arguments: [
            "valid", "no provider token", "string iat", "fractional iat", "no iat", "another team", "no kid", "alg RS256", "another key",
            "older than an hour", "issued in the future", "no topic", "another topic", "no push type", "push type banner", "priority 7",
            "expiration as a date", "collapse id of 65 bytes", "apns-id not a UUID", "topic twice", "device token of 63 digits",
            "device token not hexadecimal", "payload over 4096 bytes", "empty payload", "payload not an object", "aps not a dictionary",
            "alert push with nothing to show",
        ])
    func refusals(_ name: String) async throws {
        let apns = LocalAPNs()
        let http = try OutboundHTTP.client(extraCAFile: tls.certificatePath)
        let (request, status, reason) = try Self.request(name, apns)
        let answer = try await serveLocally(apns.router, tls: tls) { base in
            let headers = (request.providerToken.map { [("authorization", "bearer \($0)")] } ?? []) + request.headers
            return try await StandInRequests.post("\(base)/3/device/\(request.deviceToken)", headers: headers, body: request.body, http: http)
        }
        #expect(answer.status == status, "\(name): \(answer.body)")
        #expect(answer.string("reason") == reason, "\(name): \(answer.body)")
        #expect(apns.received.withLockedValue { $0.count } == (status == 200 ? 1 : 0))
    }
}

extension LocalAPNsTests.Case {
    init(_ base: Self, token: String) {
        self = base
        providerToken = token
    }
}
