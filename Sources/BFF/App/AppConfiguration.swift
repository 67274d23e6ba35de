import BFFPlatform
import Foundation
import Logging

/// What `bff serve` reads: the parts every long-running process shares, the signing keys, and the
/// HTTP server's and the IdP's settings, parsed and checked once at start-up.
public struct AppConfiguration: Sendable {
    public var base: BaseConfiguration
    public var process: ProcessConfiguration
    public var features: FeatureConfiguration
    public var tokens: TokenConfiguration
    public var httpHost: String
    public var httpPort: Int
    public var corsOrigins: Set<String>
    public var bodyLimit: Int
    /// `BFF_BODY_READ_TIMEOUT`: a request body not read in full within this closes the connection
    /// without an answer (a client trickling a body would otherwise hold a connection and a buffer).
    public var bodyReadTimeout: Duration
    /// `BFF_TRACE_TRUST_INCOMING`: continue a caller's `traceparent` (behind a gateway that sets it)
    /// instead of starting a new root span linked to it.
    public var traceTrustIncoming: Bool
    public var authRateLimit: Int
    public var authDeviceRateLimit: Int
    public var trustedProxies: [IPNetwork]
    /// `BFF_HTTP_IDLE_TIMEOUT`: a connection without a request in progress (idle, or stuck in its
    /// request's headers) is closed after this long.
    public var httpIdleTimeout: Duration
    /// `BFF_HTTP_MAX_CONNECTIONS`: connections one process holds open at most.
    public var httpMaxConnections: Int
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// `BFF_REVOCATION_POLL_INTERVAL`: how often revoked sessions are read again.
    public var revocationPollInterval: Duration
    public var oidcIssuer: URL
    public var oidcClientID: String
    public var oidcClientSecret: String?
    public var oidcRedirectURIs: Set<String>
    /// The web's Auth.js session cookie (`BFF_WEB_AUTH_*`); no secret: the cookie is not read.
    public var webSession: WebSessionConfiguration
    /// What each plan allows (`BFF_PLAN_LIMITS`).
    public var planLimits: PlanLimits
    /// The remote app configuration's file (`BFF_APP_CONFIG_FILE`); nil: none.
    public var appConfigFile: String?
    /// The contract `GET /openapi.yaml` serves (`BFF_OPENAPI_FILE`, relative to the working directory).
    public var openAPIFile: String
    /// `BFF_API_DOCS_DIR`: a browsable API reference served at `/docs/` (scripts/dev sets Swagger UI's
    /// packaged release there); nil: none.
    public var apiDocsDirectory: String?

    public var logLevel: Logger.Level { base.logLevel }
    public var shutdownGrace: Duration { process.shutdownGrace }

    public init(environment env: [String: String]) throws {
        let reader = EnvironmentReader(env)
        base = try BaseConfiguration(reader)
        process = try ProcessConfiguration(reader)
        features = try FeatureConfiguration(reader)
        tokens = try TokenConfiguration(reader)
        httpHost = reader.string("BFF_HTTP_HOST", default: "127.0.0.1")
        httpPort = try reader.int("BFF_HTTP_PORT", default: 8080, range: 0...65535)
        // Set but empty means no web origin at all, as a mobile-only deployment wants; only unset means the default.
        corsOrigins = Set(
            env["BFF_CORS_ORIGINS"] == nil
                ? ["https://app.example.com"] : reader.list("BFF_CORS_ORIGINS", default: []))
        bodyLimit = try reader.int("BFF_BODY_LIMIT", default: 64 * 1024, range: 1024...(16 * 1024 * 1024))
        traceTrustIncoming = try reader.bool("BFF_TRACE_TRUST_INCOMING", default: false)
        bodyReadTimeout = .seconds(try reader.int("BFF_BODY_READ_TIMEOUT", default: 10, range: 1...300))
        // Sized for a school: hundreds of learners behind one address sign in at the start of a lesson.
        authRateLimit = try reader.int("BFF_AUTH_RATE_LIMIT", default: 600, range: 1...1_000_000)
        authDeviceRateLimit = try reader.int("BFF_AUTH_DEVICE_RATE_LIMIT", default: 20, range: 1...1_000_000)
        trustedProxies = try reader.list("BFF_TRUSTED_PROXIES", default: []).map {
            guard let network = IPNetwork($0) else {
                throw ConfigurationError("BFF_TRUSTED_PROXIES", "has an entry that is not an IP address or CIDR: \($0)")
            }
            return network
        }
        httpIdleTimeout = .seconds(try reader.int("BFF_HTTP_IDLE_TIMEOUT", default: 30, range: 1...3_600))
        httpMaxConnections = try reader.int("BFF_HTTP_MAX_CONNECTIONS", default: 10_000, range: 16...1_000_000)
        planLimits = try PlanLimits(reader)
        appConfigFile = reader.optional("BFF_APP_CONFIG_FILE")
        openAPIFile = reader.string("BFF_OPENAPI_FILE", default: "openapi.yaml")
        apiDocsDirectory = reader.optional("BFF_API_DOCS_DIR")
        tlsCertificatePath = reader.optional("BFF_TLS_CERT")
        tlsKeyPath = reader.optional("BFF_TLS_KEY")
        revocationPollInterval = .seconds(try reader.int("BFF_REVOCATION_POLL_INTERVAL", default: 5, range: 1...60))
        let issuer = try reader.required("BFF_OIDC_ISSUER")
        guard let issuerURL = URL(string: issuer), let scheme = issuerURL.scheme?.lowercased(), let host = issuerURL.host?.lowercased(),
            scheme == "https" || scheme == "http"
        else { throw ConfigurationError("BFF_OIDC_ISSUER", "must be an https URL") }
        // Over plain http, anyone on the path could hand the server signing keys of their own and
        // sign in as any learner; only a provider on this host (development, tests) may use it.
        guard scheme == "https" || ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host) else {
            throw ConfigurationError("BFF_OIDC_ISSUER", "must be an https URL (http only for localhost), got \"\(issuer)\"")
        }
        oidcIssuer = issuerURL
        oidcClientID = try reader.required("BFF_OIDC_CLIENT_ID")
        oidcClientSecret = reader.optional("BFF_OIDC_CLIENT_SECRET")
        oidcRedirectURIs = Set(reader.list("BFF_OIDC_REDIRECT_URIS", default: []))
        if oidcRedirectURIs.isEmpty { throw ConfigurationError("BFF_OIDC_REDIRECT_URIS", "is required but not set") }
        webSession = try WebSessionConfiguration(environment: env)
        if (tlsCertificatePath == nil) != (tlsKeyPath == nil) {
            throw ConfigurationError(tlsCertificatePath == nil ? "BFF_TLS_CERT" : "BFF_TLS_KEY", "must be set together with its pair")
        }
    }
}
