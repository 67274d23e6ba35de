import Foundation
import Logging

/// Everything the server reads from the environment (DESIGN §3), parsed and checked once at start-up.
public struct AppConfiguration: Sendable {
    public var httpHost: String
    public var httpPort: Int
    public var database: DatabaseURL
    public var databasePoolSize: Int
    public var databaseTimeout: Duration
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
    public var logLevel: Logger.Level
    public var shutdownGrace: Duration
    /// `BFF_HTTP_IDLE_TIMEOUT`: a connection without a request in progress (idle, or stuck in its
    /// request's headers) is closed after this long.
    public var httpIdleTimeout: Duration
    /// `BFF_HTTP_MAX_CONNECTIONS`: connections one process holds open at most.
    public var httpMaxConnections: Int
    public var migrationsDirectory: String
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    public var jwtKeys: JWTKeyRing
    public var jwtIssuer: String
    public var jwtAudience: String
    public var accessTTL: Int
    public var refreshTTL: Int
    public var refreshReuseInterval: Int
    public var revocationPollInterval: Int
    public var oidcIssuer: URL
    public var oidcClientID: String
    public var oidcClientSecret: String?
    public var oidcRedirectURIs: Set<String>
    /// The job runtime: `BFF_JOBS_*`; a concurrency of 0 runs no worker in `bff serve`.
    public var jobs: JobRuntimeConfiguration
    /// `BFF_RECALL_BASE_INTERVAL`: seconds of a first successful recall's interval (a day).
    public var recallBaseInterval: Int
    /// `BFF_DEEP_LINK_BASE`: what a push's deep link starts with.
    public var deepLinkBase: String
    /// `BFF_PUSH_CONCURRENCY`: pushes in flight at once per process.
    public var pushConcurrency: Int
    /// The push services and the outbound CA file.
    public var push: PushConfiguration
    /// The tutoring turn's LLM (`BFF_LLM_*`); nil without `BFF_LLM_BASE_URL`.
    public var llm: LLMConfiguration?
    /// Subscriptions through RevenueCat (`BFF_REVENUECAT_*`, `BFF_IAP_*`).
    public var subscriptions: SubscriptionConfiguration
    /// What each plan allows (`BFF_PLAN_LIMITS`).
    public var planLimits: PlanLimits
    /// The remote app configuration's file (`BFF_APP_CONFIG_FILE`); nil: none.
    public var appConfigFile: String?
    /// The contract `GET /openapi.yaml` serves (`BFF_OPENAPI_FILE`, relative to the working directory).
    public var openAPIFile: String
    /// `BFF_API_DOCS_DIR`: a browsable API reference served at `/docs/` (scripts/dev sets Swagger UI's
    /// packaged release there); nil: none.
    public var apiDocsDirectory: String?

    public init(environment env: [String: String]) throws {
        let reader = EnvironmentReader(env)
        httpHost = reader.string("BFF_HTTP_HOST", default: "127.0.0.1")
        httpPort = try reader.int("BFF_HTTP_PORT", default: 8080, range: 0...65535)
        database = try DatabaseURL(parsing: try reader.required("BFF_DATABASE_URL"), variable: "BFF_DATABASE_URL")
        databasePoolSize = try reader.int("BFF_DATABASE_POOL_SIZE", default: 20, range: 1...500)
        databaseTimeout = .seconds(try reader.int("BFF_DATABASE_TIMEOUT", default: 5, range: 1...120))
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
        let level = reader.string("BFF_LOG_LEVEL", default: "info")
        guard let parsedLevel = Logger.Level(rawValue: level) else {
            throw ConfigurationError("BFF_LOG_LEVEL", "must be one of trace, debug, info, notice, warning, error, critical")
        }
        logLevel = parsedLevel
        // Longer than a tutoring turn may take (BFF_LLM_TOTAL_TIMEOUT, 60 s by default): a draining
        // server finishes the turns it accepted.
        shutdownGrace = .seconds(try reader.int("BFF_SHUTDOWN_GRACE", default: 75, range: 0...600))
        httpIdleTimeout = .seconds(try reader.int("BFF_HTTP_IDLE_TIMEOUT", default: 30, range: 1...3_600))
        httpMaxConnections = try reader.int("BFF_HTTP_MAX_CONNECTIONS", default: 10_000, range: 16...1_000_000)
        // Jobs get most of the grace to finish; the rest is for releasing those that did not.
        jobs = JobRuntimeConfiguration(
            concurrency: try reader.int("BFF_JOBS_CONCURRENCY", default: 10, range: 0...1_000),
            pollInterval: .milliseconds(try reader.int("BFF_JOBS_POLL_INTERVAL_MS", default: 1_000, range: 50...60_000)),
            lease: .seconds(try reader.int("BFF_JOBS_LEASE", default: 60, range: 5...3_600)),
            retention: .seconds(try reader.int("BFF_JOBS_RETENTION", default: 604_800, range: 60...31_536_000)),
            drain: shutdownGrace * 0.8)
        recallBaseInterval = try reader.int("BFF_RECALL_BASE_INTERVAL", default: 86_400, range: 1...31_536_000)
        deepLinkBase = reader.string("BFF_DEEP_LINK_BASE", default: "learnapp://")
        guard let scheme = deepLinkBase.split(separator: ":", maxSplits: 1).first, deepLinkBase.contains(":"),
            scheme.first?.isLetter == true, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }),
            deepLinkBase.hasSuffix("/")
        else {
            throw ConfigurationError("BFF_DEEP_LINK_BASE", "must be a URI prefix ending in / (learnapp:// or https://app.example.com/open/)")
        }
        pushConcurrency = try reader.int("BFF_PUSH_CONCURRENCY", default: 64, range: 1...10_000)
        push = try PushConfiguration(reader)
        llm = try LLMConfiguration(reader)
        subscriptions = try SubscriptionConfiguration(reader)
        planLimits = try PlanLimits(reader)
        appConfigFile = reader.optional("BFF_APP_CONFIG_FILE")
        openAPIFile = reader.string("BFF_OPENAPI_FILE", default: "openapi.yaml")
        apiDocsDirectory = reader.optional("BFF_API_DOCS_DIR")
        migrationsDirectory = reader.string("BFF_MIGRATIONS_DIR", default: "migrations")
        tlsCertificatePath = reader.optional("BFF_TLS_CERT")
        tlsKeyPath = reader.optional("BFF_TLS_KEY")
        jwtKeys = try JWTKeyRing(parsing: try reader.required("BFF_JWT_KEYS"))
        jwtIssuer = reader.string("BFF_JWT_ISSUER", default: "bff")
        jwtAudience = reader.string("BFF_JWT_AUDIENCE", default: "mobile")
        accessTTL = try reader.int("BFF_ACCESS_TTL", default: 900, range: 60...86_400)
        refreshTTL = try reader.int("BFF_REFRESH_TTL", default: 2_592_000, range: 3_600...31_536_000)
        refreshReuseInterval = try reader.int("BFF_REFRESH_REUSE_INTERVAL", default: 10, range: 0...300)
        revocationPollInterval = try reader.int("BFF_REVOCATION_POLL_INTERVAL", default: 5, range: 1...60)
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
        if (tlsCertificatePath == nil) != (tlsKeyPath == nil) {
            throw ConfigurationError(tlsCertificatePath == nil ? "BFF_TLS_CERT" : "BFF_TLS_KEY", "must be set together with its pair")
        }
    }
}

/// Reads typed values out of the environment; every failure names the variable.
struct EnvironmentReader {
    let env: [String: String]

    init(_ env: [String: String]) { self.env = env }

    func optional(_ name: String) -> String? {
        guard let value = env[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    func required(_ name: String) throws -> String {
        guard let value = optional(name) else { throw ConfigurationError(name, "is required but not set") }
        return value
    }

    func string(_ name: String, default fallback: String) -> String {
        optional(name) ?? fallback
    }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        guard let raw = optional(name) else { return fallback }
        guard let value = Int(raw), range.contains(value) else {
            throw ConfigurationError(name, "must be an integer in \(range.lowerBound)...\(range.upperBound), got \"\(raw)\"")
        }
        return value
    }

    func bool(_ name: String, default fallback: Bool) throws -> Bool {
        guard let raw = optional(name) else { return fallback }
        switch raw.lowercased() {
        case "true": return true
        case "false": return false
        default: throw ConfigurationError(name, "must be true or false, got \"\(raw)\"")
        }
    }

    func list(_ name: String, default fallback: [String]) -> [String] {
        guard let raw = optional(name) else { return fallback }
        return raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
