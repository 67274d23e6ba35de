import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let rateLimitLimit = Self("RateLimit-Limit")!
    static let rateLimitRemaining = Self("RateLimit-Remaining")!
    static let rateLimitReset = Self("RateLimit-Reset")!
}

/// Applies a `RateLimiter` to the requests under a path prefix, keyed by client address.
/// Rejections are 429 `rate_limited` with `Retry-After`; every answer carries the `RateLimit-*` headers.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let limiter: RateLimiter
    let pathPrefix: String
    let name: String
    let rate: Int
    let period: Duration
    let clientAddress: ClientAddress

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix(pathPrefix) else { return try await next(request, context) }
        let key = "\(name):\(clientAddress.resolve(request, context: context))"
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
            let retryAfter = Int(decision.retryAfter.rounded(.up))
            response = APIError(
                .tooManyRequests, "rate_limited", "Too many requests; retry after \(retryAfter) seconds."
            ).response()
            response.headers[.retryAfter] = String(max(1, retryAfter))
        }
        response.headers.applyRateLimit(decision)
        return response
    }
}

extension HTTPFields {
    mutating func applyRateLimit(_ decision: RateLimiter.Decision) {
        self[.rateLimitLimit] = String(decision.limit)
        self[.rateLimitRemaining] = String(decision.remaining)
        self[.rateLimitReset] = String(Int(decision.resetAfter.rounded(.up)))
    }
}
