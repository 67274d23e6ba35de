import Foundation
import Hummingbird
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

@testable import BFF
@testable import BFFPlatform

/// A small OpenID provider of the test's own (discovery, JWKS, token endpoint) so tests can sign ID
/// and logout tokens with keys they control: an ES256 key published in the JWKS and one that is not.
/// Its token endpoint redeems only codes the test granted (`grant`), each once, and checks the PKCE
/// verifier against the challenge of the authorization request, as a provider does.
final class LocalIdP: Sendable {
    private let publishedKey = NIOLockedValueBox((key: ES256PrivateKey(), kid: "published-key"))
    let unpublished = ES256PrivateKey()
    /// Requests seen by the token endpoint (form bodies and Authorization headers).
    let tokenRequests = NIOLockedValueBox<[(form: String, authorization: String?)]>([])
    /// Codes granted and not redeemed yet: the PKCE challenge they were asked with and the ID token.
    private let grants = NIOLockedValueBox<[String: (challenge: String, idToken: String)]>([:])
    /// The JWKS answer's `Cache-Control`, none when nil.
    let jwksCacheControl = NIOLockedValueBox<String?>(nil)
    /// The discovery document's token endpoint and JWKS URI, when the test wants others than its own.
    let tokenEndpointOverride = NIOLockedValueBox<String?>(nil)
    let jwksURIOverride = NIOLockedValueBox<String?>(nil)
    let port = NIOLockedValueBox<Int>(0)
    /// How many times discovery and the JWKS were fetched.
    let discoveryRequests = NIOLockedValueBox(0)
    let jwksRequests = NIOLockedValueBox(0)
    /// The JWKS endpoint's status (anything but 200 answers no keys) and how long it takes to answer.
    let jwksStatus = NIOLockedValueBox(HTTPResponse.Status.ok)
    let jwksDelay = NIOLockedValueBox(Duration.zero)
    /// How long the JWKS answer pauses halfway through its body.
    let jwksBodyStall = NIOLockedValueBox(Duration.zero)
    /// Whether the issuer ends in `/`, as some providers' do (Auth0).
    let trailingSlash: Bool

    init(trailingSlash: Bool = false) {
        self.trailingSlash = trailingSlash
    }

    var base: String { "http://127.0.0.1:\(port.withLockedValue { $0 })" }
    var issuer: String { base + (trailingSlash ? "/" : "") }

    /// The key the JWKS publishes now, and its key id.
    var published: ES256PrivateKey { publishedKey.withLockedValue { $0.key } }
    var publishedKID: String { publishedKey.withLockedValue { $0.kid } }

    /// Withdraws the published key and publishes a new one, under `kid` (by default the same key id,
    /// as a provider that rotates without changing `kid` does).
    func rotatePublishedKey(kid: String? = nil) {
        publishedKey.withLockedValue { $0 = (ES256PrivateKey(), kid ?? $0.kid) }
    }

    /// How many requests reached `/token-moved-here`, where `/token-moved` redirects with a 307.
    let redirectedTokenRequests = NIOLockedValueBox(0)

    /// What the provider does when the learner signs in: `code` becomes redeemable once, by the
    /// verifier of `challenge`, for `idToken`.
    func grant(code: String, challenge: String, idToken: String) {
        grants.withLockedValue { $0[code] = (challenge, idToken) }
    }

    /// Serves while `body` runs.
    func serve<T: Sendable>(_ body: @escaping @Sendable (LocalIdP) async throws -> T) async throws -> T {
        let router = Router()
        router.get("/.well-known/openid-configuration") { [self] _, _ -> Response in
            discoveryRequests.withLockedValue { $0 += 1 }
            let tokenEndpoint = tokenEndpointOverride.withLockedValue { $0 } ?? "\(base)/token"
            let jwksURI = jwksURIOverride.withLockedValue { $0 } ?? "\(base)/jwks"
            return json(
                """
                {"issuer":"\(issuer)","authorization_endpoint":"\(base)/authorize","token_endpoint":"\(tokenEndpoint)",
                 "jwks_uri":"\(jwksURI)","id_token_signing_alg_values_supported":["ES256"]}
                """)
        }
        router.get("/jwks") { [self] _, _ -> Response in
            jwksRequests.withLockedValue { $0 += 1 }
            try await Task.sleep(for: jwksDelay.withLockedValue { $0 })
            let status = jwksStatus.withLockedValue { $0 }
            guard status == .ok else { return Response(status: status) }
            let (key, kid) = publishedKey.withLockedValue { $0 }
            let (x, y) = key.publicKey.parameters!
            let text = """
                {"keys":[{"kty":"EC","crv":"P-256","x":"\(x)","y":"\(y)","kid":"\(kid)","alg":"ES256","use":"sig"}]}
                """
            let stall = jwksBodyStall.withLockedValue { $0 }
            guard stall > .zero else {
                var response = json(text)
                if let cacheControl = jwksCacheControl.withLockedValue({ $0 }) { response.headers[.cacheControl] = cacheControl }
                return response
            }
            let half = text.utf8.count / 2
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init { writer in
                    try await writer.write(ByteBuffer(string: String(text.prefix(half))))
                    try await Task.sleep(for: stall)
                    try await writer.write(ByteBuffer(string: String(text.dropFirst(half))))
                    try await writer.finish(nil)
                })
        }
        router.post("/token") { [self] request, _ -> Response in
            let form = String(buffer: try await request.body.collect(upTo: 65536))
            tokenRequests.withLockedValue { $0.append((form, request.headers[.authorization])) }
            let fields = Dictionary(
                (URLComponents(string: "?" + form)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
            // RFC 6749 §4.1.3 and RFC 7636 §4.6: the code once, with the verifier of its challenge.
            guard fields["grant_type"] == "authorization_code", let code = fields["code"], let verifier = fields["code_verifier"],
                let grant = grants.withLockedValue({ $0.removeValue(forKey: code) }),
                PKCE.challenge(for: verifier) == grant.challenge
            else {
                return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"invalid_grant"}"#)))
            }
            return json(#"{"access_token":"at","token_type":"Bearer","id_token":"\#(grant.idToken)"}"#)
        }
        // A token endpoint that moved: a 307 keeps the method and the body (code and verifier).
        router.post("/token-moved") { [self] _, _ -> Response in
            Response(status: .temporaryRedirect, headers: [.location: "\(base)/token-moved-here"])
        }
        router.post("/token-moved-here") { [self] _, _ -> Response in
            redirectedTokenRequests.withLockedValue { $0 += 1 }
            return Response(status: .badRequest)
        }
        let started = AsyncStream<Void>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { [port] channel in
                port.withLockedValue { $0 = channel.localAddress?.port ?? 0 }
                started.continuation.yield()
            },
            logger: TestEnvironment.quietLogger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            let serviceGroup = ServiceGroup(services: [app], logger: TestEnvironment.quietLogger)
            group.addTask {
                try await serviceGroup.run()
                return nil
            }
            for await _ in started.stream { break }
            let result = try await body(self)
            await serviceGroup.triggerGracefulShutdown()
            return result
        }
    }

    /// Signs claims as this IdP would (or with the unpublished key, or naming another key id).
    func sign<Claims: JWTPayload>(_ claims: Claims, withPublishedKey: Bool = true, kid: String? = nil) async throws -> String {
        let keys = JWTKeyCollection()
        let kid = JWKIdentifier(string: kid ?? publishedKID)
        await keys.add(ecdsa: withPublishedKey ? published : unpublished, kid: kid)
        return try await keys.sign(claims, kid: kid)
    }

    private func json(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// ID token claims a test can bend one at a time.
struct TestIDClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim = "student-42"
    var aud: AudienceClaim = "bff-tests"
    var exp: ExpirationClaim = .init(value: Date().addingTimeInterval(300))
    var iat: IssuedAtClaim = .init(value: Date())
    var nonce: String?
    var email: String? = "student42@example.com"
    var name: String? = "Student 42"
    var sid: String? = "idp-session-1"
    var azp: String?
    /// When the learner authenticated (seconds since 1970); nil leaves the claim out.
    var authTime: Double?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, email, name, sid, azp
        case authTime = "auth_time"
    }

    func verify(using algorithm: some JWTAlgorithm) throws {}
}

/// A back-channel logout token's claims.
struct TestLogoutClaims: JWTPayload {
    /// An event's value: `{}` as the specification has it, or a string, which it does not allow.
    enum Event: Codable {
        case object
        case string(String)

        init(from decoder: any Decoder) throws { self = .object }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .object: _ = encoder.container(keyedBy: EmptyKeys.self)
            case .string(let text):
                var container = encoder.singleValueContainer()
                try container.encode(text)
            }
        }

        private enum EmptyKeys: CodingKey {}
    }
    var iss: IssuerClaim
    var aud: AudienceClaim = "bff-tests"
    var iat: IssuedAtClaim = .init(value: Date())
    var exp: ExpirationClaim? = .init(value: Date().addingTimeInterval(120))
    var jti: IDClaim = .init(value: UUID().uuidString)
    var events: [String: Event] = ["http://schemas.openid.net/event/backchannel-logout": .object]
    var sub: SubjectClaim?
    var sid: String?
    var nonce: String?

    func verify(using algorithm: some JWTAlgorithm) throws {}
}
