import AsyncHTTPClient
import BFFWire
import Foundation
import JWTKit
import NIOCore
import StandIns
import Testing
import _CryptoExtras

@testable import BFF
@testable import BFFPlatform

/// The FCM stand-in refuses what Google documents its token endpoint and `messages:send` refuse,
/// each rule with the answer Google gives; and the BFF's own assertion passes.
@Suite("Local FCM checks as Google does", .timeLimit(.minutes(3)))
struct LocalFCMTests {
    static let grantType = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
    let tls: LocalTLS

    init() throws {
        tls = try LocalTLS.make()
    }

    func http() throws -> HTTPClient { try OutboundHTTP.client(extraCAFile: tls.certificatePath) }

    static func claims(_ fcm: LocalFCM, aud: String, iat: String? = nil, exp: String? = nil, drop: String? = nil, extra: String = "") -> String {
        let now = StandInRequests.now
        var members = [
            "iss": #""\#(fcm.clientEmail)""#, "scope": #""https://www.googleapis.com/auth/firebase.messaging""#, "aud": #""\#(aud)""#,
            "iat": iat ?? "\(now)", "exp": exp ?? "\(now + 3600)",
        ]
        if let drop { members[drop] = nil }
        return "{" + members.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",") + extra + "}"
    }

    /// The token request of each case, and the `error` Google answers it with (nil: 200).
    static func grant(_ name: String, _ fcm: LocalFCM, aud: String) throws -> (contentType: String, form: String, error: String?) {
        let header = #"{"alg":"RS256","typ":"JWT","kid":"\#(fcm.privateKeyID)"}"#
        let sign = StandInRequests.rs256(fcm.key)
        func assertion(header: String = header, claims: String = claims(fcm, aud: aud), sign: (Data) throws -> Data = sign) throws -> String {
            try StandInRequests.jwt(header: header, claims: claims, sign: sign)
        }
        func form(_ assertion: String) -> String { "grant_type=\(grantType)&assertion=\(assertion)" }
        let now = StandInRequests.now
        let formType = "application/x-www-form-urlencoded"
        switch name {
        case "valid": return (formType, form(try assertion()), nil)
        case "string iat": return (formType, form(try assertion(claims: claims(fcm, aud: aud, iat: #""\#(now)""#))), "invalid_grant")
        case "string exp": return (formType, form(try assertion(claims: claims(fcm, aud: aud, exp: #""\#(now + 3600)""#))), "invalid_grant")
        case "fractional iat": return (formType, form(try assertion(claims: claims(fcm, aud: aud, iat: "\(now).25"))), "invalid_grant")
        case "no iat": return (formType, form(try assertion(claims: claims(fcm, aud: aud, drop: "iat"))), "invalid_grant")
        case "no exp": return (formType, form(try assertion(claims: claims(fcm, aud: aud, drop: "exp"))), "invalid_grant")
        case "no iss": return (formType, form(try assertion(claims: claims(fcm, aud: aud, drop: "iss"))), "invalid_grant")
        case "no scope": return (formType, form(try assertion(claims: claims(fcm, aud: aud, drop: "scope"))), "invalid_scope")
        case "wrong aud": return (formType, form(try assertion(claims: claims(fcm, aud: "https://oauth2.googleapis.com/token"))), "invalid_grant")
        case "expired":
            return (formType, form(try assertion(claims: claims(fcm, aud: aud, iat: "\(now - 7200)", exp: "\(now - 3600)"))), "invalid_grant")
        case "longer than an hour":
            return (formType, form(try assertion(claims: claims(fcm, aud: aud, exp: "\(now + 3601)"))), "invalid_grant")
        case "issued in the future":
            return (formType, form(try assertion(claims: claims(fcm, aud: aud, iat: "\(now + 600)", exp: "\(now + 1200)"))), "invalid_grant")
        case "alg HS256": return (formType, form(try assertion(header: #"{"alg":"HS256","typ":"JWT","kid":"\#(fcm.privateKeyID)"}"#)), "invalid_grant")
        case "no typ": return (formType, form(try assertion(header: #"{"alg":"RS256","kid":"\#(fcm.privateKeyID)"}"#)), "invalid_grant")
        case "unknown kid": return (formType, form(try assertion(header: #"{"alg":"RS256","typ":"JWT","kid":"key-2"}"#)), "invalid_grant")
        case "another key's signature":
            return (formType, form(try assertion(sign: StandInRequests.rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048)))), "invalid_grant")
        case "wrong grant type": return (formType, "grant_type=client_credentials&assertion=\(try assertion())", "unsupported_grant_type")
        case "JSON body": return ("application/json", #"{"grant_type":"\#(grantType)","assertion":"\#(try assertion())"}"#, "invalid_request")
        default: throw TestSetupError("no case \(name)")
        }
    }

    @Test(
        "the token endpoint refuses each malformed grant with Google's error",
        arguments: [
            "valid", "string iat", "string exp", "fractional iat", "no iat", "no exp", "no iss", "no scope", "wrong aud", "expired",
            "longer than an hour", "issued in the future", "alg HS256", "no typ", "unknown kid", "another key's signature", "wrong grant type",
            "JSON body",
        ])
    func tokenEndpoint(_ name: String) async throws {
        let fcm = LocalFCM()
        let http = try http()
        let answer = try await serveLocally(fcm.router, tls: tls) { base in
            _ = try fcm.credentialsFile(in: tls.directory, base: base)
            let grant = try Self.grant(name, fcm, aud: "\(base)/token")
            return (grant.error, try await StandInRequests.post("\(base)/token", headers: [("content-type", grant.contentType)], body: grant.form, http: http))
        }
        if let error = answer.0 {
            #expect(answer.1.status == 400, "\(name): \(answer.1.body)")
            #expect(answer.1.string("error") == error, "\(name): \(answer.1.body)")
            #expect(fcm.issued.withLockedValue { $0 }.isEmpty)
        } else {
            #expect(answer.1.status == 200, "\(answer.1.body)")
            #expect(answer.1.string("access_token")?.hasPrefix("ya29.") == true)
        }
    }

    @Test("the BFF's assertion passes the token endpoint: RS256 with the key id, integer iat and exp one hour apart; a string iat is invalid_grant")
    func bffAssertion() async throws {
        let fcm = LocalFCM()
        let http = try http()
        try await serveLocally(fcm.router, tls: tls) { base in
            let file = try fcm.credentialsFile(in: tls.directory, base: base)
            let account = try JSONDecoder().decode(FCMSender.ServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: file)))
            let key = try JWTKit.Insecure.RSA.PrivateKey(backing: fcm.key)
            let assertion = try await FCMAccessTokens.assertion(account: account, key: key, issuedAt: Date())
            // The claims' own text: NumericDates are JSON integers, not strings or fractions.
            let claims = try #require(Base64URL.decode(String(assertion.split(separator: ".")[1])).map { String(decoding: $0, as: UTF8.self) })
            let iat = try #require(claims.firstMatch(of: /"iat":(\d+)[,}]/)?.1).description
            let exp = try #require(claims.firstMatch(of: /"exp":(\d+)[,}]/)?.1).description
            #expect(Int64(exp)! - Int64(iat)! == 3600)
            let accepted = try await StandInRequests.post(
                "\(base)/token", headers: [("content-type", "application/x-www-form-urlencoded")],
                body: "grant_type=\(Self.grantType)&assertion=\(assertion)", http: http)
            #expect(accepted.status == 200, "\(accepted.body)")
            // The same claims with iat as a string, as the sender once wrote them.
            let stringIat = claims.replacingOccurrences(of: #""iat":\#(iat)"#, with: #""iat":"\#(iat)""#)
            let header = try #require(Base64URL.decode(String(assertion.split(separator: ".")[0])).map { String(decoding: $0, as: UTF8.self) })
            let refused = try await StandInRequests.post(
                "\(base)/token", headers: [("content-type", "application/x-www-form-urlencoded")],
                body: "grant_type=\(Self.grantType)&assertion=\(try StandInRequests.jwt(header: header, claims: stringIat, sign: StandInRequests.rs256(fcm.key)))",
                http: http)
            #expect(refused.status == 400)
            #expect(refused.string("error") == "invalid_grant")
        }
    }

    /// A message body of each case, and Google's answer to it (status, `error.status`).
    static func send(_ name: String, token: String) -> (contentType: String, body: String, status: Int, code: String?) {
        let valid = String(buffer: FCMSender.payload(FCMSenderTests.message, token: token))
        func replacing(_ old: String, _ new: String) -> String {
            precondition(valid.contains(old), old)
            return valid.replacingOccurrences(of: old, with: new)
        }
        let json = "application/json; charset=utf-8"
        switch name {
        case "valid": return (json, valid, 200, nil)
        case "text/plain": return ("text/plain", valid, 400, "INVALID_ARGUMENT")
        case "no message": return (json, #"{"validate_only":false}"#, 400, "INVALID_ARGUMENT")
        case "unknown top-level field": return (json, String(valid.dropLast()) + #","priority":"high"}"#, 400, "INVALID_ARGUMENT")
        case "unknown message field": return (json, replacing(#"{"message":{"#, #"{"message":{"to":"x","#), 400, "INVALID_ARGUMENT")
        case "no target": return (json, replacing(#""token":"\#(token)","#, ""), 400, "INVALID_ARGUMENT")
        case "two targets": return (json, replacing(#""token":"#, #""topic":"news","token":"#), 400, "INVALID_ARGUMENT")
        case "a number in data": return (json, replacing(#""data":{"#, #""data":{"count":3,"#), 400, "INVALID_ARGUMENT")
        case "a reserved data key": return (json, replacing(#""data":{"#, #""data":{"from":"bff","#), 400, "INVALID_ARGUMENT")
        case "ttl as a number": return (json, valid.replacing(/"ttl":"(\d+)s"/) { #""ttl":\#($0.1)"# }, 400, "INVALID_ARGUMENT")
        case "ttl without its unit": return (json, valid.replacing(/"ttl":"(\d+)s"/) { #""ttl":"\#($0.1)""# }, 400, "INVALID_ARGUMENT")
        case "priority urgent": return (json, replacing(#""priority":"HIGH""#, #""priority":"urgent""#), 400, "INVALID_ARGUMENT")
        case "priority lower-case": return (json, replacing(#""priority":"HIGH""#, #""priority":"high""#), 200, nil)
        case "collapse_key as a number": return (json, valid.replacing(/"collapse_key":"[^"]*"/) { _ in #""collapse_key":7"# }, 400, "INVALID_ARGUMENT")
        case "an apns header as a number": return (json, replacing(#""apns-priority":"10""#, #""apns-priority":10"#), 400, "INVALID_ARGUMENT")
        default: return (json, "", 0, "no such case")
        }
    }

    @Test(
        "messages:send refuses each malformed message with 400 INVALID_ARGUMENT",
        arguments: [
            "valid", "text/plain", "no message", "unknown top-level field", "unknown message field", "no target", "two targets", "a number in data",
            "a reserved data key", "ttl as a number", "ttl without its unit", "priority urgent", "priority lower-case", "collapse_key as a number",
            "an apns header as a number",
        ])
    func messages(_ name: String) async throws {
        let fcm = LocalFCM()
        let http = try http()
        let expected = Self.send(name, token: FCMSenderTests.token)
        let answer = try await serveLocally(fcm.router, tls: tls) { base in
            let grant = try Self.grant("valid", fcm, aud: "\(base)/token")
            _ = try fcm.credentialsFile(in: tls.directory, base: base)
            let token = try await StandInRequests.post("\(base)/token", headers: [("content-type", grant.contentType)], body: grant.form, http: http)
            let access = try #require(token.string("access_token"))
            return try await StandInRequests.post(
                "\(base)/v1/projects/\(fcm.project)/messages:send", headers: [("authorization", "Bearer \(access)"), ("content-type", expected.contentType)],
                body: expected.body, http: http)
        }
        #expect(answer.status == expected.status, "\(name): \(answer.body)")
        #expect(answer.string("error.status") == expected.code, "\(name): \(answer.body)")
        #expect(fcm.received.withLockedValue { $0.count } == (expected.status == 200 ? 1 : 0))
    }

    @Test("messages:send wants the Bearer access token the endpoint issued")
    func bearer() async throws {
        let fcm = LocalFCM()
        let http = try http()
        let body = String(buffer: FCMSender.payload(FCMSenderTests.message, token: FCMSenderTests.token))
        let answers = try await serveLocally(fcm.router, tls: tls) { base in
            var answers: [StandInRequests.Answer] = []
            for headers in [[("content-type", "application/json")], [("authorization", "Bearer ya29.made-up"), ("content-type", "application/json")]] {
                answers.append(try await StandInRequests.post("\(base)/v1/projects/\(fcm.project)/messages:send", headers: headers, body: body, http: http))
            }
            return answers
        }
        #expect(answers.map(\.status) == [401, 401])
        #expect(answers.map { $0.string("error.status") } == ["UNAUTHENTICATED", "UNAUTHENTICATED"])
    }
}
