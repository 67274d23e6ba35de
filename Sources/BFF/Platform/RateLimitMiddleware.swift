import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let rateLimitLimit = Self("RateLimit-Limit")!
    static let rateLimitRemaining = Self("RateLimit-Remaining")!
    static let rateLimitReset = Self("RateLimit-Reset")!
}

/// Applies a `RateLimiter` to the requests of some routes, each counted under the key `key` gives it
/// (nil: not counted). Rejections are 429 `rate_limited` with `Retry-After`; every counted answer
/// carries the `RateLimit-*` headers of the tightest limit it passed through.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let limiter: RateLimiter
    let rate: Int
    let period: Duration
    /// The bucket a request is counted in, from its routed path (see `RouteTable.routedPath`); nil
    /// for a request this limit does not apply to.
    let key: @Sendable (_ path: String, _ request: Request, _ context: Context) -> String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let key = key(RouteTable.routedPath(request.uri.path), request, context) else { return try await next(request, context) }
        let decision = try await limiter.limit(key: key, rate: rate, per: period)
        var response: Response
        if decision.allowed {
            do {
                response = try await next(request, context)
            } catch {
                // Map here so the RateLimit-* headers reach error answers too.
                response = ErrorMiddleware.response(for: error, context: context)
            }
        } else {
            response = APIError.rateLimited(decision).response()
        }
        response.headers.applyRateLimit(decision)
        return response
    }
}

extension RateLimitMiddleware {
    /// Login and logout per client address. Refresh is left out: many learners behind one school's
    /// or carrier's address refresh every 15 minutes, and its 256-bit token and per-session limit
    /// bound it. So are the IdP's back-channel logouts: they come from its few addresses, for every
    /// user, and one refused is a session left signed in; each is a signed, single-use token.
    static func authPerAddress(limiter: RateLimiter, rate: Int, clientAddress: ClientAddress) -> Self {
        let exempt: Set<String> = ["/api/v1/auth/refresh", "/api/v1/auth/backchannel-logout"]
        return Self(limiter: limiter, rate: rate, period: .seconds(60)) { path, request, context in
            guard path.hasPrefix("/api/v1/auth/"), !exempt.contains(path) else { return nil }
            return "auth:ip:\(clientAddress.resolve(request, context: context))"
        }
    }

    /// Login starts per device id, beneath the address's limit: one app (or one script) cannot use up
    /// a school's shared budget. A malformed device id is not counted; the operation refuses it.
    static func loginPerDevice(limiter: RateLimiter, rate: Int) -> Self {
        Self(limiter: limiter, rate: rate, period: .seconds(60)) { path, request, _ in
            guard path == "/api/v1/auth/start", let device = request.uri.queryParameters["device_id"].map(String.init),
                AuthService.validDeviceID(device)
            else { return nil }
            return "auth:device:\(device)"
        }
    }
}

extension APIError {
    /// 429 `rate_limited` with `Retry-After` (at least one second) and the limit's `RateLimit-*` headers.
    static func rateLimited(_ decision: RateLimiter.Decision) -> APIError {
        var refusal = rateLimited(retryAfter: decision.retryAfter)
        refusal.headers.applyRateLimit(decision)
        return refusal
    }

    /// 429 `rate_limited` for `subject` ("Too many <subject>; …"), `Retry-After` rounded up to whole seconds, at least one.
    static func rateLimited(retryAfter seconds: Double, subject: String = "requests") -> APIError {
        let retryAfter = max(1, Int(seconds.rounded(.up)))
        return APIError(
            .rateLimited, "Too many \(subject); retry after \(retryAfter) seconds.",
            headers: [.retryAfter: String(retryAfter)])
    }
}

extension HTTPFields {
    /// Sets the `RateLimit-*` headers to `decision`, unless an inner limit already set tighter ones.
    mutating func applyRateLimit(_ decision: RateLimiter.Decision) {
        if let inner = self[.rateLimitRemaining].flatMap(Int.init), inner <= decision.remaining, decision.allowed { return }
        self[.rateLimitLimit] = String(decision.limit)
        self[.rateLimitRemaining] = String(decision.remaining)
        self[.rateLimitReset] = String(Int(decision.resetAfter.rounded(.up)))
    }
}
