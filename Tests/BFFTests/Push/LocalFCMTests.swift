import AsyncHTTPClient
import BFFWire
import Foundation
import JWTKit
import NIOCore
import StandIns
import Testing
import _CryptoExtras

@testable import BFF

/// The FCM stand-in's token endpoint refuses what Google documents it refuses, each rule with the
/// answer Google gives; and the BFF's own assertion passes.
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
}
