import HTTPTypes
import Hummingbird

/// What the request's credentials say, decided once per request by `AuthenticationMiddleware`.
public enum Authentication: Sendable {
    case anonymous
    case authenticated(Principal)
    case invalid

    /// The 401 a protected operation answers, nil when there is a valid token.
    var refusal: APIError? {
        switch self {
        case .anonymous: APIError.invalidToken("A bearer access token is required.")
        case .invalid: APIError.invalidToken()
        case .authenticated: nil
        }
    }
}

extension APIError {
    static func invalidToken(_ message: String = "The access token is missing, expired or invalid.") -> APIError {
        APIError(.invalidToken, message, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""])
    }

    static func insufficientScope(_ scope: String) -> APIError {
        APIError(
            .insufficientScope, "This operation needs the scope \(scope).",
            headers: [.wwwAuthenticate: "Bearer error=\"insufficient_scope\", scope=\"\(scope)\""])
    }
}

/// `getAuthUser` of the requirements (§8.4): the Bearer header first; only when there is none, the
/// `bff_session` cookie carrying the same AppJWT (the web). A present Bearer header alone decides.
///
/// A request for a protected operation without a valid token, or with a token lacking the
/// operation's scope, is refused here, before its parameters or body are parsed: 401 or 403
/// whatever is wrong with them. Only the middleware before this one answers first (413 for a body
/// over the limit, 429 from the login rate limit). The operations themselves check the token and
/// its scope again.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let tokens: AccessTokens
    let revoked: RevokedSessions
    let routes: RouteTableBox
    /// `BFF_CORS_ORIGINS`: the only origins a cookie-authenticated unsafe request may come from.
    let allowedOrigins: Set<String>

    /// The operations of the contract that take no token (`security: []`); every other one under
    /// `/api/v1` needs a token. A test holds this list against openapi.yaml.
    static let publicOperations: Set<String> = [
        "GET /api/v1/auth/start", "GET /api/v1/auth/callback", "POST /api/v1/auth/refresh",
        "POST /api/v1/auth/backchannel-logout",
        // RevenueCat's own credential, checked by WebhookAuthorizationMiddleware.
        "POST /api/v1/iap/revenuecat/webhook",
        "GET /api/v1/app-config",
    ]

    /// The scope each protected operation of the contract names in its `security` requirement. A
    /// test holds this table against openapi.yaml.
    static let requiredScopes: [String: String] = [
        "POST /api/v1/auth/logout": "profile:read",
        "GET /api/v1/me": "profile:read",
        "DELETE /api/v1/me": "profile:read",
        "GET /api/v1/me/export": "profile:read",
        "GET /api/v1/devices": "profile:read",
        "DELETE /api/v1/devices/{device_id}": "profile:read",
        "GET /api/v1/chats": "chat:rw",
        "POST /api/v1/chats": "chat:rw",
        "GET /api/v1/chats/{chat_id}": "chat:rw",
        "PATCH /api/v1/chats/{chat_id}": "chat:rw",
        "DELETE /api/v1/chats/{chat_id}": "chat:rw",
        "GET /api/v1/chats/{chat_id}/messages": "chat:rw",
        "POST /api/v1/chats/{chat_id}/evaluation": "chat:rw",
        "GET /api/v1/chats/{chat_id}/tags": "chat:rw",
        "GET /api/v1/settings": "chat:rw",
        "PUT /api/v1/settings": "chat:rw",
        "GET /api/v1/subjects": "chat:rw",
        "POST /api/v1/chat": "chat:rw",
        "POST /api/v1/push/register": "push:register",
        "POST /api/v1/push/unregister": "push:register",
        "GET /api/v1/recalls": "chat:rw",
        "GET /api/v1/recalls/{recall_id}": "chat:rw",
        "POST /api/v1/recalls/{recall_id}/opened": "chat:rw",
        "POST /api/v1/recalls/{recall_id}/evaluation": "chat:rw",
        "POST /api/v1/iap/verify": "iap:verify",
        "GET /api/v1/me/subscription": "profile:read",
    ]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let (authentication, byCookie) = authenticate(request)
        context.authentication = authentication
        // A browser attaches the cookie to a cross-site form post or fetch as well (a `SameSite`
        // the web sets is no defence on older browsers, nor from a sibling subdomain): a request
        // that acts as the learner by cookie must come from one of the web's own origins. Only a
        // valid cookie needs this: an invalid one acts as nobody.
        if byCookie, case .authenticated = authentication, !Self.safeMethods.contains(request.method),
            request.headers[.origin].map(allowedOrigins.contains) != true
        {
            throw APIError(.originNotAllowed)
        }
        // Only requests without a valid token, or with a token narrower than the apps get, look
        // the operation up.
        switch context.authentication {
        case .authenticated(let principal):
            if !principal.hasEveryScope, let operation = operation(of: request), let scope = Self.requiredScopes[operation],
                !principal.has(scope: scope)
            {
                throw APIError.insufficientScope(scope)
            }
        case .anonymous, .invalid:
            if let operation = operation(of: request), !Self.publicOperations.contains(operation),
                let refusal = context.authentication.refusal
            {
                throw refusal
            }
        }
        return try await next(request, context)
    }

    /// The contract's operation the request is for, as `"METHOD /template"`, when it is under `/api/v1`.
    private func operation(of request: Request) -> String? {
        let path = RouteTable.routedPath(request.uri.path)
        guard path.hasPrefix("/api/v1/") else { return nil }
        return routes.operation(for: path, method: request.method)
    }

    static let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options]

    /// What the credentials say, and whether they came from the cookie.
    func authenticate(_ request: Request) -> (Authentication, byCookie: Bool) {
        let token: String
        let byCookie: Bool
        if let header = request.headers[.authorization] {
            guard let credentials = Self.bearerCredentials(header) else { return (.invalid, false) }
            token = credentials
            byCookie = false
        } else if let cookie = request.cookies["bff_session"]?.value, !cookie.isEmpty {
            token = cookie
            byCookie = true
        } else {
            return (.anonymous, false)
        }
        guard let principal = try? tokens.verify(token), !revoked.contains(principal.familyID) else { return (.invalid, byCookie) }
        return (.authenticated(principal), byCookie)
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

/// The check every protected operation starts with.
enum Authorization {
    static func require(_ scope: String) throws -> Principal {
        try require(scope, in: AppRequestContext.current)
    }

    static func require(_ scope: String, in context: AppRequestContext?) throws -> Principal {
        let authentication = context?.authentication ?? .anonymous
        if let refusal = authentication.refusal { throw refusal }
        guard case .authenticated(let principal) = authentication, principal.has(scope: scope) else {
            throw APIError.insufficientScope(scope)
        }
        return principal
    }
}
