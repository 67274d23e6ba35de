import AsyncHTTPClient
import BFFPlatform
import BFFWire
import Foundation
import JWTKit
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The IdP refused (a bad or replayed code, a token that fails verification): 401 `idp_rejected`.
struct IdPRejected: Error, CustomStringConvertible {
    let reason: String
    var description: String { "identity provider rejected: \(reason)" }
}

/// The IdP could not be reached or answered with a server error: 503 `idp_unavailable`.
struct IdPUnavailable: Error, CustomStringConvertible {
    let reason: String
    var description: String { "identity provider unavailable: \(reason)" }
}

/// The claims of an ID token (OpenID Connect Core §2) this server reads.
struct IDTokenClaims: JWTPayload {
    let iss: IssuerClaim
    let sub: SubjectClaim
    let aud: AudienceClaim
    let exp: ExpirationClaim
    let iat: IssuedAtClaim
    let nonce: String?
    let email: String?
    let name: String?
    let sid: String?
    /// The authorized party (Core §2): required to be this client when `aud` names others too.
    let azp: String?
    /// When the learner last authenticated at the IdP (Core §2), in seconds since 1970: older than
    /// the login when the IdP completed it from a session of its own without asking.
    let authTime: Double?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, email, name, sid, azp
        case authTime = "auth_time"
    }

    func verify(using algorithm: some JWTAlgorithm) throws {}
}

/// A back-channel logout token (OpenID Connect Back-Channel Logout 1.0 §2.4).
struct LogoutTokenClaims: JWTPayload {
    let iss: IssuerClaim
    let aud: AudienceClaim
    let iat: IssuedAtClaim
    let exp: ExpirationClaim?
    let jti: IDClaim
    let events: [String: EventValue]
    let sub: SubjectClaim?
    let sid: String?
    let nonce: String?

    func verify(using algorithm: some JWTAlgorithm) throws {}
}

/// A member of a logout token's `events`: only whether it is a JSON object is read (the
/// back-channel logout event's must be one, §2.4); its content is not.
struct EventValue: Codable, Sendable {
    let isObject: Bool

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        isObject = (try? decoder.container(keyedBy: AnyKey.self)) != nil
    }

    func encode(to encoder: any Encoder) throws {
        _ = encoder.container(keyedBy: AnyKey.self)
    }
}

extension HTTPClient {
    /// The IdP's client follows no redirect: a token request redirected with 307 or 308 would be
    /// sent again, code and PKCE verifier included, wherever the redirect points (https to http
    /// too). A redirect is an answer like any other non-2xx one. Process-wide like `.shared`.
    static let withoutRedirects: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration.untraced)
    }()
}

/// An OpenID Connect relying party: discovery (cached for an hour), the JWKS (kept as long as its
/// `Cache-Control` allows, an hour without one; re-fetched on an unknown `kid` or a failed signature
/// check, at most once a minute; both fetched once for all concurrent callers), the code exchange
/// with PKCE, and ID/logout token verification for RS256 and ES256.
final class OIDCClient: Sendable {
    struct Metadata: Decodable, Sendable {
        let issuer: String
        let authorizationEndpoint: String
        let tokenEndpoint: String
        let jwksURI: String

        enum CodingKeys: String, CodingKey {
            case issuer
            case authorizationEndpoint = "authorization_endpoint"
            case tokenEndpoint = "token_endpoint"
            case jwksURI = "jwks_uri"
        }
    }

    private struct KeySet: Sendable {
        let keys: JWTKeyCollection
        let keyIDs: Set<String>
        /// How long the provider lets the set be kept (its `Cache-Control: max-age`).
        let maxAge: Duration
        /// Tells one fetch's set from the next.
        let fetchID = UUID()
    }

    let issuer: String
    let clientID: String
    let clientSecret: String?
    private let http: HTTPClient
    private let timeout: TimeAmount = .seconds(5)
    private let metadataFetch: SharedFetch<Metadata>
    private let keySetFetch: SharedFetch<KeySet>
    /// How old the JWKS must be before a token naming a key not in it fetches it again.
    private let jwksRefetchInterval: Duration
    static let metadataLifetime: Duration = .seconds(3600)
    /// How long a JWKS without `Cache-Control: max-age` is kept, and the longest any is: a key the
    /// provider withdrew (leaked, rotated out) stops being trusted within it.
    static let defaultKeySetMaxAge: Duration = .seconds(3600)
    static let longestKeySetMaxAge: Duration = .seconds(86_400)
    static let leeway: TimeInterval = 60
    /// How old a back-channel logout token may be, long enough for a provider's retries after an
    /// outage; its jti is remembered that long (migration 0009), so a replay within it does nothing.
    static let logoutTokenMaxAge: TimeInterval = 24 * 3600

    /// `fetchFailureBackoff`: after a failed fetch of discovery or the JWKS, how long requests are
    /// refused as the provider being unavailable before the next fetch.
    init(
        issuer: URL, clientID: String, clientSecret: String?, http: HTTPClient = .withoutRedirects,
        jwksRefetchInterval: Duration = .seconds(60), fetchFailureBackoff: Duration = .seconds(5),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        let issuer = Self.withoutTrailingSlashes(issuer.absoluteString)
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.http = http
        self.jwksRefetchInterval = jwksRefetchInterval
        let timeout = timeout
        let metadataFetch = SharedFetch(failureBackoff: fetchFailureBackoff, now: now) {
            let metadata: Metadata = try await Self.getJSON("\(issuer)/.well-known/openid-configuration", http: http, timeout: timeout)
            guard Self.withoutTrailingSlashes(metadata.issuer) == issuer else {
                throw IdPUnavailable(reason: "discovery names issuer \(metadata.issuer), expected \(issuer)")
            }
            try Self.requireSecureEndpoints(metadata, issuer: issuer)
            return metadata
        }
        self.metadataFetch = metadataFetch
        keySetFetch = SharedFetch(failureBackoff: fetchFailureBackoff, now: now) {
            let metadata = try await metadataFetch.get { _, age in age >= Self.metadataLifetime }
            return try await Self.fetchKeySet(metadata.jwksURI, http: http, timeout: timeout, shortestMaxAge: jwksRefetchInterval)
        }
    }

    /// The code and verifier go to the token endpoint, and the JWKS decides whom the server
    /// believes: both over https, but for a provider on this host (the configuration allows an http
    /// issuer only there, for development and tests).
    static func requireSecureEndpoints(_ metadata: Metadata, issuer: String) throws {
        let developmentIssuer = URL(string: issuer)?.scheme?.lowercased() == "http"
        for (name, endpoint) in [("token_endpoint", metadata.tokenEndpoint), ("jwks_uri", metadata.jwksURI)] {
            guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), url.host != nil,
                scheme == "https" || (developmentIssuer && scheme == "http" && Self.isLoopback(url.host))
            else { throw IdPUnavailable(reason: "discovery's \(name) is not an https URL") }
        }
    }

    private static func isLoopback(_ host: String?) -> Bool {
        guard let host = host?.lowercased() else { return false }
        return ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host)
    }

    func metadata() async throws -> Metadata {
        try await metadataFetch.get { _, age in age >= Self.metadataLifetime }
    }

    /// The authorization request URL of the code flow with PKCE S256.
    /// With `reauthenticate`, the IdP is asked to authenticate the learner again even in a session of
    /// its own (Core §3.1.2.1: `prompt=login`, `max_age=0`).
    func authorizationURL(
        redirectURI: String, state: String, nonce: String, codeChallenge: String, reauthenticate: Bool = false
    ) async throws -> String {
        let metadata = try await metadata()
        guard var components = URLComponents(string: metadata.authorizationEndpoint) else {
            throw IdPUnavailable(reason: "authorization endpoint is not a URL")
        }
        components.queryItems =
            (components.queryItems ?? []) + [
                URLQueryItem(name: "response_type", value: "code"),
                URLQueryItem(name: "client_id", value: clientID),
                URLQueryItem(name: "redirect_uri", value: redirectURI),
                URLQueryItem(name: "scope", value: "openid profile email"),
                URLQueryItem(name: "state", value: state),
                URLQueryItem(name: "nonce", value: nonce),
                URLQueryItem(name: "code_challenge", value: codeChallenge),
                URLQueryItem(name: "code_challenge_method", value: "S256"),
            ]
            + (reauthenticate ? [URLQueryItem(name: "prompt", value: "login"), URLQueryItem(name: "max_age", value: "0")] : [])
        // '+' is legal in a query but read as a space by form decoders.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        guard let url = components.string else { throw IdPUnavailable(reason: "authorization URL could not be built") }
        return url
    }

    /// Exchanges the code at the token endpoint (client_secret_basic when a secret is configured) and returns the ID token.
    func exchange(code: String, redirectURI: String, codeVerifier: String) async throws -> String {
        let metadata = try await metadata()
        var form = URLComponents()
        var items = [
            URLQueryItem(name: "grant_type", value: "authorization_code"),
            URLQueryItem(name: "code", value: code),
            URLQueryItem(name: "redirect_uri", value: redirectURI),
            URLQueryItem(name: "code_verifier", value: codeVerifier),
        ]
        var request = HTTPClientRequest(url: metadata.tokenEndpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        if let clientSecret {
            let credentials = "\(Self.formEncode(clientID)):\(Self.formEncode(clientSecret))"
            request.headers.add(name: "Authorization", value: "Basic \(Data(credentials.utf8).base64EncodedString())")
        } else {
            items.append(URLQueryItem(name: "client_id", value: clientID))
        }
        form.queryItems = items
        let body = (form.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        request.body = .bytes(ByteBuffer(string: body))

        let (status, _, bytes) = try await Self.answer(to: request, named: "token endpoint", http: http, timeout: timeout)
        switch status.code {
        case 200..<300:
            struct TokenResponse: Decodable { let id_token: String? }
            guard let decoded = try? JSONDecoder().decode(TokenResponse.self, from: Data(buffer: bytes)),
                let idToken = decoded.id_token
            else { throw IdPRejected(reason: "token response has no id_token") }
            return idToken
        case 400..<500:
            throw IdPRejected(reason: "token endpoint answered \(status.code)")
        default:
            throw IdPUnavailable(reason: "token endpoint answered \(status.code)")
        }
    }

    /// Verifies an ID token: signature (RS256/ES256) against the JWKS, `iss`, `aud`, `exp` (60 s leeway),
    /// `iat` not in the future and `nonce`.
    func verifyIDToken(_ token: String, nonce: String, now: Date = Date()) async throws -> IDTokenClaims {
        let claims: IDTokenClaims = try await verifySignature(token)
        try checkCommon(iss: claims.iss.value, aud: claims.aud.value, iat: claims.iat.value, now: now)
        // Core §3.1.3.7 (4, 5): a token for several audiences must name this client as the party it
        // was issued to; one naming another party is not ours, whatever its audience says.
        if claims.aud.value.count > 1 || claims.azp != nil {
            guard claims.azp == clientID else { throw IdPRejected(reason: "azp is not this client") }
        }
        guard claims.exp.value.addingTimeInterval(Self.leeway) > now else { throw IdPRejected(reason: "id token expired") }
        guard claims.nonce == nonce else { throw IdPRejected(reason: "nonce mismatch") }
        // The account's key and the back-channel logout's key: a value that does not fit its column
        // is none the provider could mean (Core §2 caps sub at 255 characters).
        guard Self.fitsKeyColumn(claims.sub.value) else { throw IdPRejected(reason: "sub is empty or longer than 255 characters") }
        if let sid = claims.sid, !Self.fitsKeyColumn(sid) { throw IdPRejected(reason: "sid is empty or longer than 255 characters") }
        return claims
    }

    /// Verifies a logout token (Back-Channel Logout 1.0 §2.6).
    func verifyLogoutToken(_ token: String, now: Date = Date()) async throws -> LogoutTokenClaims {
        let claims: LogoutTokenClaims = try await verifySignature(token)
        try checkCommon(iss: claims.iss.value, aud: claims.aud.value, iat: claims.iat.value, now: now)
        // Back-Channel Logout 1.0 §2.4 (errata 1): exp is required.
        guard let exp = claims.exp else { throw IdPRejected(reason: "logout token has no exp") }
        guard exp.value.addingTimeInterval(Self.leeway) > now else { throw IdPRejected(reason: "logout token expired") }
        guard claims.events["http://schemas.openid.net/event/backchannel-logout"]?.isObject == true else {
            throw IdPRejected(reason: "logout token lacks the back-channel logout event as an object")
        }
        guard claims.nonce == nil else { throw IdPRejected(reason: "logout token carries a nonce") }
        guard claims.sub != nil || claims.sid != nil else { throw IdPRejected(reason: "logout token has neither sub nor sid") }
        guard !claims.jti.value.isEmpty else { throw IdPRejected(reason: "logout token has no jti") }
        guard Self.fitsKeyColumn(claims.jti.value) else { throw IdPRejected(reason: "logout token's jti is longer than 255 characters") }
        // A provider sends the token as the session ends, and retries it for a while at most.
        guard claims.iat.value > now.addingTimeInterval(-Self.logoutTokenMaxAge) else {
            throw IdPRejected(reason: "logout token issued more than \(Int(Self.logoutTokenMaxAge)) s ago")
        }
        return claims
    }

    /// The issuer as this service keys users by it. Providers differ on a final `/` (Auth0 has one)
    /// and the discovery URL drops it (OpenID Connect Discovery §4), so `iss` is compared without it.
    static func withoutTrailingSlashes(_ issuer: String) -> String {
        var text = Substring(issuer)
        while text.hasSuffix("/") { text.removeLast() }
        return String(text)
    }

    private static func fitsKeyColumn(_ value: String) -> Bool {
        (1...255).contains(value.unicodeScalars.count) && !value.unicodeScalars.contains("\0")
    }

    private func checkCommon(iss: String, aud: [String], iat: Date, now: Date) throws {
        guard Self.withoutTrailingSlashes(iss) == issuer else { throw IdPRejected(reason: "issuer mismatch") }
        guard aud.contains(clientID) else { throw IdPRejected(reason: "audience mismatch") }
        guard iat <= now.addingTimeInterval(Self.leeway) else { throw IdPRejected(reason: "issued in the future") }
    }

    private func verifySignature<Claims: JWTPayload>(_ token: String) async throws -> Claims {
        guard let header = JOSEHeader(token: token), let alg = header.alg, ["RS256", "ES256"].contains(alg) else {
            throw IdPRejected(reason: "unsupported token algorithm")
        }
        // The set is fetched again once the provider's max-age has passed, and sooner, at most once
        // a minute (anyone can send a token to the logout endpoint), for a token naming a key not
        // held: the provider rotated its keys.
        let keys = try await keySetFetch.get { [jwksRefetchInterval] held, age in
            age >= held.maxAge || (header.kid.map { !held.keyIDs.contains($0) } == true && age >= jwksRefetchInterval)
        }
        if let kid = header.kid, !keys.keyIDs.contains(kid) { throw IdPRejected(reason: "unknown signing key") }
        do {
            return try await keys.keys.verify(token, as: Claims.self)
        } catch {
            // A provider that rotated a key under the same kid: the held key fails the signature.
            // One fetch, under the same rate as an unknown kid's, and one more try with what it brings.
            let fresh = try await keySetFetch.get { [jwksRefetchInterval] held, age in
                held.fetchID == keys.fetchID && age >= jwksRefetchInterval
            }
            guard fresh.fetchID != keys.fetchID, header.kid.map(fresh.keyIDs.contains) ?? true else {
                throw IdPRejected(reason: "signature: \(error)")
            }
            do {
                return try await fresh.keys.verify(token, as: Claims.self)
            } catch {
                throw IdPRejected(reason: "signature: \(error)")
            }
        }
    }

    private static func fetchKeySet(_ url: String, http: HTTPClient, timeout: TimeAmount, shortestMaxAge: Duration) async throws -> KeySet {
        let (json, headers) = try await getText(url, http: http, timeout: timeout)
        let maxAge = min(
            max(maxAge(cacheControl: headers[canonicalForm: "Cache-Control"]) ?? defaultKeySetMaxAge, shortestMaxAge),
            longestKeySetMaxAge)
        struct KeyIDs: Decodable { struct Key: Decodable { let kid: String? }; let keys: [Key] }
        guard let parsed = try? JSONDecoder().decode(KeyIDs.self, from: Data(json.utf8)) else {
            throw IdPUnavailable(reason: "JWKS is not valid JSON")
        }
        let collection = JWTKeyCollection()
        do {
            try await collection.add(jwksJSON: json)
        } catch {
            throw IdPUnavailable(reason: "JWKS could not be loaded: \(error)")
        }
        return KeySet(keys: collection, keyIDs: Set(parsed.keys.compactMap(\.kid)), maxAge: maxAge)
    }

    /// How long `Cache-Control` lets an answer be kept: its `max-age`, zero for `no-store` or
    /// `no-cache`, nil when it says neither.
    static func maxAge(cacheControl values: [Substring]) -> Duration? {
        var found: Duration?
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            switch parts.first {
            case "no-store", "no-cache": return .zero
            case "max-age":
                guard parts.count == 2, let seconds = Int64(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))),
                    seconds >= 0
                else { continue }
                found = .seconds(seconds)
            default: continue
            }
        }
        return found
    }

    private static func getJSON<T: Decodable>(_ url: String, http: HTTPClient, timeout: TimeAmount) async throws -> T {
        let (text, _) = try await getText(url, http: http, timeout: timeout)
        do {
            return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        } catch {
            throw IdPUnavailable(reason: "\(url) answered unexpected JSON")
        }
    }

    private static func getText(_ url: String, http: HTTPClient, timeout: TimeAmount) async throws -> (String, HTTPHeaders) {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let (status, headers, body) = try await answer(to: request, named: url, http: http, timeout: timeout)
        guard status == .ok else { throw IdPUnavailable(reason: "\(url) answered \(status.code)") }
        return (String(buffer: body), headers)
    }

    /// The status and the whole body within `timeout`: the client's own deadline ends with the
    /// response head, and a body that stalls would hold the request (and every caller waiting for
    /// a shared fetch) until the connection's read timeout.
    private static func answer(
        to request: HTTPClientRequest, named name: String, http: HTTPClient, timeout: TimeAmount
    ) async throws -> (HTTPResponseStatus, HTTPHeaders, ByteBuffer) {
        let expired: @Sendable () -> any Error = { IdPUnavailable(reason: "\(name): no whole answer within \(timeout)") }
        do {
            return try await withDeadline(.nanoseconds(timeout.nanoseconds), expired: expired) {
                let response = try await http.execute(request, timeout: timeout, span: "idp \(name)")
                return (response.status, response.headers, try await response.body.collect(upTo: 1 << 20))
            }
        } catch let error as IdPUnavailable {
            throw error
        } catch {
            throw IdPUnavailable(reason: "\(name): \(error)")
        }
    }

    /// RFC 6749 §2.3.1: client credentials are form-encoded before Basic encoding.
    private static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// The JOSE header fields read before choosing a key.
struct JOSEHeader: Decodable {
    let alg: String?
    let kid: String?

    init?(token: String) {
        guard let dot = token.firstIndex(of: "."), token.utf8.count <= 16_384,
            let bytes = Base64URL.decode(String(token[..<dot])),
            let header = try? JSONDecoder().decode(JOSEHeader.self, from: Data(bytes))
        else { return nil }
        self = header
    }
}
