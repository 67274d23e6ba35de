import BFFPlatform
import HTTPTypes
import Hummingbird

/// What the request's credentials say, decided once per request by `AuthenticationMiddleware`.
public enum Authentication: Sendable {
    case anonymous
    /// Boxed: the context carries this through every step, and a principal held inline made each
    /// copy of the context 80 bytes and three retains larger.
    indirect case authenticated(Principal)
    case invalid

    /// The 401 a protected operation answers, nil when there is a valid token.
    var refusal: APIError? {
        switch self {
        case .anonymous: APIError.invalidToken(.bearerTokenRequired)
        case .invalid: APIError.invalidToken()
        case .authenticated: nil
        }
    }
}

extension APIError {
    /// 403 naming every scope the operation needs (RFC 6750 §3: a space-delimited list).
    static func insufficientScope(_ scopes: [Scope]) -> APIError {
        let names = scopes.map(\.rawValue).joined(separator: " ")
        return APIError(
            .insufficientScope, .scopesNeeded(names, count: scopes.count),
            headers: [.wwwAuthenticate: "Bearer error=\"insufficient_scope\", scope=\"\(names)\""])
    }
}

/// `getAuthUser` of docs/requirements.md §8.4: the Bearer header first; only when there is none, the
/// web's Auth.js session cookie (`WebSessions`, docs/web-session.md). A present Bearer header alone
/// decides.
///
/// A request for a protected operation without a valid token, or with a token lacking one of the
/// operation's scopes (`OperationPolicy.access`), is refused here, before its body is read or its
/// parameters parsed: 401 or 403 whatever is wrong with them. The handlers take the principal from
/// the context (`AppRequestContext.principal()`), which checks again.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let tokens: AccessTokens
    let revoked: RevokedSessions
    /// Nil without `BFF_WEB_AUTH_SECRET`: then the web's cookie is not read.
    let webSessions: WebSessions?
    /// `BFF_CORS_ORIGINS`: the only origins a cookie-authenticated unsafe request may come from.
    let allowedOrigins: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.authentication = try await authenticate(request, readsCookie: context.operation?.policy.scopes.isEmpty == false)
        if let operation = context.operation, case .scopes(let scopes) = operation.policy.access {
            switch context.authentication {
            case .authenticated(let principal):
                // Every app login carries every scope: only a narrowed token compares them.
                if !principal.hasEveryScope, scopes.contains(where: { !principal.has(scope: $0.rawValue) }) {
                    throw APIError.insufficientScope(scopes)
                }
            case .anonymous, .invalid:
                if let refusal = context.authentication.refusal { throw refusal }
            }
        }
        return try await next(request, context)
    }

    static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options]

    /// What the credentials say. The cookie is read only for an operation that needs a scope: the
    /// others act for nobody, and a stale cookie must not stand in their way (nor cost a sign-up).
    func authenticate(_ request: Request, readsCookie: Bool) async throws -> Authentication {
        if let header = request.headers[.authorization] {
            guard let token = Self.bearerCredentials(header), let principal = try? tokens.verify(token),
                let family = principal.familyID, !revoked.contains(family)
            else { return .invalid }
            return .authenticated(principal)
        }
        guard readsCookie, let webSessions, let token = WebSessions.token(in: request.cookies, named: webSessions.cookieName) else {
            return .anonymous
        }
        guard let session = webSessions.verify(token) else { return .invalid }
        // A browser attaches the cookie to a cross-site form post or fetch as well (a `SameSite`
        // the web sets is no defence on older browsers, nor from a sibling subdomain): a request
        // that acts as the learner by cookie must come from one of the web's own origins. Only a
        // valid cookie needs this: an invalid one acts as nobody. Checked before the learner is
        // looked up, so a forged request makes no account either.
        if !Self.safeMethods.contains(request.method), request.headers[.origin].map(allowedOrigins.contains) != true {
            throw APIError(.originNotAllowed)
        }
        guard let principal = try await webSessions.principal(for: session) else { return .invalid }
        return .authenticated(principal)
    }

    /// The token of `Bearer <token>` (scheme case-insensitive, RFC 9110 §11.1), spaces around it trimmed.
    static func bearerCredentials(_ header: String) -> String? {
        var utf8 = Substring(header).utf8
        let scheme = "bearer ".utf8
        guard utf8.count > scheme.count,
            zip(utf8.prefix(scheme.count), scheme).allSatisfy({ $0 | 0x20 == $1 })
        else { return nil }
        utf8 = utf8.dropFirst(scheme.count)
        while let first = utf8.first, first == 0x20 || first == 0x09 { utf8 = utf8.dropFirst() }
        while let last = utf8.last, last == 0x20 || last == 0x09 { utf8 = utf8.dropLast() }
        return utf8.isEmpty ? nil : String(Substring(utf8))
    }
}
