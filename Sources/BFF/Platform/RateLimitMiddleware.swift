import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

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
    /// Paths whose handler counts the request inside its own statement (see `DeferredRateLimit`).
    var deferredPaths: Set<String> = []
    /// Paths under the prefix that are not limited.
    var exemptPaths: Set<String> = []

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = RouteTable.routedPath(request.uri.path)
        guard path.hasPrefix(pathPrefix), !exemptPaths.contains(path) else { return try await next(request, context) }
        let key = "\(name):\(clientAddress.resolve(request, context: context))"
        if deferredPaths.contains(path) {
            return try await deferred(request, context: context, key: key, next: next)
        }
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

    /// The handler takes the decision in its own statement and leaves it in the context's slot; a
    /// request that ended before that statement (an invalid body, say) is counted here afterwards.
    private func deferred(_ request: Request, context: Context, key: String,
                          next: (Request, Context) async throws -> Response) async throws -> Response {
        let slot = DeferredRateLimit(key: key, rate: rate, period: period)
        var context = context
        context.deferredRateLimit = slot
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = ErrorMiddleware.response(for: error, context: context)
        }
        let decision: RateLimiter.Decision
        if let taken = slot.decision {
            decision = taken
        } else {
            decision = try await limiter.limit(key: key, rate: rate, per: period)
            if !decision.allowed { response = APIError.rateLimited(decision).response() }
        }
        response.headers.applyRateLimit(decision)
        return response
    }
}

/// A per-address limit that the handler counts inside its own database statement, saving the
/// request a round trip (refresh: `bff_refresh_rotate_ring`). The handler records the decision; the
/// middleware puts it on the response.
public final class DeferredRateLimit: Sendable {
    let key: String
    let rate: Int
    let period: Duration
    private let taken = NIOLockedValueBox<RateLimiter.Decision?>(nil)

    init(key: String, rate: Int, period: Duration) {
        self.key = key
        self.rate = rate
        self.period = period
    }

    var decision: RateLimiter.Decision? { taken.withLockedValue { $0 } }

    /// Records the decision of `bff_rate_limit_take`'s answer (see `RateLimiter.Decision`) and returns it.
    @discardableResult
    func record(allowed: Bool, ahead: Double) -> RateLimiter.Decision {
        let decision = RateLimiter.Decision(allowed: allowed, ahead: ahead, rate: rate, periodSeconds: period.seconds)
        taken.withLockedValue { $0 = decision }
        return decision
    }
}

extension APIError {
    /// 429 `rate_limited` with `Retry-After` (at least one second).
    static func rateLimited(_ decision: RateLimiter.Decision) -> APIError {
        rateLimited(retryAfter: decision.retryAfter)
    }

    /// 429 `rate_limited` for `subject` ("Too many <subject>; …"), `Retry-After` rounded up to whole seconds, at least one.
    static func rateLimited(retryAfter seconds: Double, subject: String = "requests") -> APIError {
        let retryAfter = max(1, Int(seconds.rounded(.up)))
        return APIError(.tooManyRequests, "rate_limited", "Too many \(subject); retry after \(retryAfter) seconds.",
                        headers: [.retryAfter: String(retryAfter)])
    }
}

extension HTTPFields {
    mutating func applyRateLimit(_ decision: RateLimiter.Decision) {
        self[.rateLimitLimit] = String(decision.limit)
        self[.rateLimitRemaining] = String(decision.remaining)
        self[.rateLimitReset] = String(Int(decision.resetAfter.rounded(.up)))
    }
}
