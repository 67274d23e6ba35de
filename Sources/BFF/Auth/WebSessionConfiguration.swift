import BFFPlatform

/// The web's Auth.js session cookie as `bff serve` reads it (docs/web-session.md): the web's
/// secrets and which cookie carries the token.
public struct WebSessionConfiguration: Sendable, Equatable {
    /// `BFF_WEB_AUTH_SECRET`, then `_1`, `_2`, `_3`, as the web's `secret` array lists them: the
    /// first is the one the web encrypts with, every one decrypts. Empty: the cookie is not read.
    public var secrets: [String]
    /// `BFF_WEB_AUTH_INSECURE_COOKIE`: the web runs on plain http (development), where Auth.js
    /// names its cookie without the `__Secure-` prefix.
    public var insecureCookie: Bool

    /// Auth.js's session cookie name, which is also the key derivation's salt.
    public var cookieName: String { insecureCookie ? "authjs.session-token" : "__Secure-authjs.session-token" }

    static let secretVariables = ["BFF_WEB_AUTH_SECRET", "BFF_WEB_AUTH_SECRET_1", "BFF_WEB_AUTH_SECRET_2", "BFF_WEB_AUTH_SECRET_3"]

    public init(environment: [String: String]) throws {
        var secrets: [String] = []
        for name in Self.secretVariables {
            guard let value = environment[name] else { continue }
            // Used byte for byte, as Auth.js uses its AUTH_SECRET: no trimming, which would derive
            // another key than the web's. Blank is a mistake, not "off".
            guard !value.allSatisfy(\.isWhitespace) else {
                throw ConfigurationError(name, "is set but empty: give it the web's Auth.js secret, or unset it")
            }
            secrets.append(value)
        }
        if !secrets.isEmpty, environment["BFF_WEB_AUTH_SECRET"] == nil {
            throw ConfigurationError("BFF_WEB_AUTH_SECRET", "is required when BFF_WEB_AUTH_SECRET_1, _2 or _3 is set")
        }
        self.secrets = secrets
        insecureCookie = try EnvironmentReader(environment).bool("BFF_WEB_AUTH_INSECURE_COOKIE", default: false)
    }
}
