import BFFWire
import Testing

@testable import BFF
@testable import BFFPlatform

@Suite("Configuration", .timeLimit(.minutes(3)))
struct ConfigurationTests {
    private let valid: [String: String] = [
        "BFF_DATABASE_URL": "postgres://bff:secret@db.internal:6543/bff?sslmode=require",
        "BFF_JWT_KEYS": "k1:" + Base64URL.encode([UInt8](repeating: 1, count: 32)),
        "BFF_OIDC_ISSUER": "https://idp.example.com",
        "BFF_OIDC_CLIENT_ID": "mobile",
        "BFF_OIDC_REDIRECT_URIS": "com.example.app:/oauth/callback",
    ]

    @Test("a complete environment parses with the documented defaults")
    func defaults() throws {
        let configuration = try AppConfiguration(environment: valid)
        #expect(configuration.httpHost == "127.0.0.1")
        #expect(configuration.httpPort == 8080)
        #expect(configuration.bodyLimit == 65_536)
        #expect(configuration.corsOrigins == ["https://app.example.com"])
        #expect(configuration.tokens.accessLifetime == .seconds(900) && configuration.tokens.refreshLifetime == .seconds(2_592_000))
        #expect(configuration.revocationPollInterval == .seconds(5))
        #expect(configuration.authRateLimit == 600 && configuration.authDeviceRateLimit == 20)
        #expect(configuration.base.database.host == "db.internal" && configuration.base.database.port == 6543)
        #expect(configuration.base.database.password == "secret" && configuration.base.database.tls == .require)
        #expect(configuration.process.admin == AdminListener.Configuration(host: "127.0.0.1", port: 9090))
    }

    @Test(
        "a missing or malformed variable stops start-up with a line naming it",
        arguments: [
            ("BFF_DATABASE_URL", nil as String?),
            ("BFF_DATABASE_URL", "mysql://x"),
            ("BFF_JWT_KEYS", nil),
            ("BFF_JWT_KEYS", "k1:c2hvcnQ"),
            ("BFF_HTTP_PORT", "eighty"),
            ("BFF_OIDC_ISSUER", "not a url"),
            ("BFF_OIDC_ISSUER", "http://idp.example.com"),
            ("BFF_OIDC_ISSUER", "ftp://idp.example.com"),
            ("BFF_LOG_LEVEL", "loud"),
            ("BFF_REVOCATION_POLL_INTERVAL", "0"),
            ("BFF_REVOCATION_POLL_INTERVAL", "61"),
            ("BFF_AUTH_DEVICE_RATE_LIMIT", "0"),
            // Each once crashed start-up with an index out of range.
            ("BFF_TRUSTED_PROXIES", "/"),
            ("BFF_TRUSTED_PROXIES", "10.0.0.0/8, /"),
            ("BFF_TRUSTED_PROXIES", "10.0.0.0/"),
            ("BFF_TRUSTED_PROXIES", "/24"),
            ("BFF_TRUSTED_PROXIES", "10.0.0.0/8/8"),
            ("BFF_JOBS_CONCURRENCY", "-1"),
            ("BFF_JOBS_POLL_INTERVAL_MS", "10"),
            ("BFF_RECALL_BASE_INTERVAL", "0"),
            ("BFF_DEEP_LINK_BASE", "learnapp"),
            ("BFF_DEEP_LINK_BASE", "learnapp://chats"),
            ("BFF_PUSH_ROUTE", "carrier-pigeon"),
            ("BFF_NH_CONNECTION_STRING", "Endpoint=sb://x/"),
            // Without the other three, a lone APNs variable is refused, naming one that is missing.
            ("BFF_APNS_KEY_ID", "ABC123DEFG"),
            ("BFF_FCM_BASE_URL", "http://fcm.googleapis.com"),
            ("BFF_OUTBOUND_CA_FILE", "/nonexistent/ca.pem"),
            ("BFF_ADMIN_PORT", "metrics"),
            ("BFF_ADMIN_PORT", "70000"),
        ])
    func namesTheVariable(variable: String, value: String?) {
        var environment = valid
        environment[variable] = value
        if variable == "BFF_NH_CONNECTION_STRING" { environment["BFF_PUSH_ROUTE"] = "notification-hubs" }
        // The variable the error names: the missing partner for a lone APNs variable.
        let named = variable == "BFF_APNS_KEY_ID" ? "BFF_APNS_KEY_FILE" : variable
        #expect {
            try AppConfiguration(environment: environment)
        } throws: { error in
            (error as? ConfigurationError)?.variable == named
                && String(describing: error).contains(named)
        }
    }

    @Test("a BFF_JWT_KEYS entry written secret-first is refused without echoing the secret")
    func keyEntryBackwards() {
        let secret = Base64URL.encode([UInt8](repeating: 7, count: 32))
        var environment = valid
        environment["BFF_JWT_KEYS"] = "\(secret):k1"
        #expect {
            try AppConfiguration(environment: environment)
        } throws: { error in
            (error as? ConfigurationError)?.variable == "BFF_JWT_KEYS" && !String(describing: error).contains(secret)
        }
    }

    @Test("BFF_CORS_ORIGINS set but empty allows no web origin; unset, the default")
    func emptyCORSOrigins() throws {
        var environment = valid
        environment["BFF_CORS_ORIGINS"] = " "
        #expect(try AppConfiguration(environment: environment).corsOrigins.isEmpty)
        environment["BFF_CORS_ORIGINS"] = "https://a.example, https://b.example"
        #expect(try AppConfiguration(environment: environment).corsOrigins == ["https://a.example", "https://b.example"])
    }

    @Test("an http issuer is accepted on this host only", arguments: ["http://127.0.0.1:9400", "http://localhost:9400/", "http://[::1]:9400"])
    func loopbackIssuer(issuer: String) throws {
        var environment = valid
        environment["BFF_OIDC_ISSUER"] = issuer
        #expect(try AppConfiguration(environment: environment).oidcIssuer.absoluteString == issuer)
    }

    @Test("socket URLs in libpq style select the Unix socket")
    func socketURL() throws {
        let url = try DatabaseURL(parsing: "postgres://bff@localhost:54329/postgres?host=/tmp/pg/run")
        #expect(url.socketDirectory == "/tmp/pg/run")
        #expect(url.clientConfiguration().unixSocketPath == "/tmp/pg/run/.s.PGSQL.54329")
        let short = try DatabaseURL(parsing: "postgres:///bff?host=/var/run/postgresql")
        #expect(short.database == "bff" && short.port == 5432)
    }
}
