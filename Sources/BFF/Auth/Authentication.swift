import HTTPTypes
import Hummingbird

/// What the request's credentials say, decided once per request by `AuthenticationMiddleware`.
public enum Authentication: Sendable {
    case anonymous
    case authenticated(Principal)
    case invalid
}

extension APIError {
    static func invalidToken(_ message: String = "The access token is missing, expired or invalid.") -> APIError {
        APIError(.unauthorized, "invalid_token", message, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""])
    }

    static func insufficientScope(_ scope: String) -> APIError {
        APIError(.forbidden, "insufficient_scope", "This operation needs the scope \(scope).",
                 headers: [.wwwAuthenticate: "Bearer error=\"insufficient_scope\", scope=\"\(scope)\""])
    }
}

/// `getAuthUser` of the requirements (§8.4): the Bearer header first; only when there is none, the
/// `bff_session` cookie carrying the same AppJWT (the web). A present Bearer header alone decides.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let tokens: AccessTokens
    let revoked: RevokedSessions

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.authentication = authenticate(request)
        return try await next(request, context)
    }

    func authenticate(_ request: Request) -> Authentication {
        let token: String
        if let header = request.headers[.authorization] {
            guard let credentials = Self.bearerCredentials(header) else { return .invalid }
            token = credentials
        } else if let cookie = request.cookies["bff_session"]?.value, !cookie.isEmpty {
            token = cookie
        } else {
            return .anonymous
        }
        guard let principal = try? tokens.verify(token), !revoked.contains(principal.familyID) else { return .invalid }
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

/// The check every protected operation starts with.
enum Authorization {
    static func require(_ scope: String) throws -> Principal {
        try require(scope, in: AppRequestContext.current)
    }

    static func require(_ scope: String, in context: AppRequestContext?) throws -> Principal {
        switch context?.authentication ?? .anonymous {
        case .anonymous:
            throw APIError.invalidToken("A bearer access token is required.")
        case .invalid:
            throw APIError.invalidToken()
        case .authenticated(let principal):
            guard principal.has(scope: scope) else { throw APIError.insufficientScope(scope) }
            return principal
        }
    }
}
