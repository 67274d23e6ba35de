import BFFPlatform
import Foundation
import HTTPTypes
import Hummingbird

extension HTTPField.Name {
    static let rateLimitLimit = Self("RateLimit-Limit")!
    static let rateLimitRemaining = Self("RateLimit-Remaining")!
    static let rateLimitReset = Self("RateLimit-Reset")!
}

/// Counts a request against each limit of its operation's policy (`OperationPolicy.rateLimits`)
/// with the shared `RateLimiter`. It runs after authentication, so a request refused there costs no
/// database round trip. Rejections are 429 `rate_limited` with `Retry-After`; every counted answer
/// carries the `RateLimit-*` headers of the tightest limit it passed through.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let limiter: RateLimiter
    /// `BFF_AUTH_RATE_LIMIT`, a minute per client address.
    let loginPerAddress: Int
    /// `BFF_AUTH_DEVICE_RATE_LIMIT`, a minute per device id.
    let loginPerDevice: Int
    let clientAddress: ClientAddress

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let limits = context.operation?.policy.rateLimits, !limits.isEmpty else { return try await next(request, context) }
        var decisions: [RateLimiter.Decision] = []
        for limit in limits {
            guard let (key, rate, period) = bucket(limit, request, context) else { continue }
            let decision = try await limiter.limit(key: key, rate: rate, per: period)
            decisions.append(decision)
            guard decision.allowed else {
                var response = APIError.rateLimited(decision).response(in: await context.answerLanguage())
                for decision in decisions { response.headers.applyRateLimit(decision) }
                return response
            }
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            // Map here so the RateLimit-* headers reach error answers too.
            var context = context
            context.language = await context.errorLanguage(for: error)
            response = ErrorMiddleware.response(for: error, context: context)
        }
        for decision in decisions { response.headers.applyRateLimit(decision) }
        return response
    }

    /// The key of a learner's count in a per-user bucket (account deletion removes them).
    static func userKey(bucket: String, userID: UUID) -> String {
        "user:\(bucket):\(userID.uuidString.lowercased())"
    }

    /// The key a request is counted under for `limit`, with its rate; nil when it is not counted.
    private func bucket(
        _ limit: OperationPolicy.RateLimit, _ request: Request, _ context: Context
    ) -> (key: String, rate: Int, period: Duration)? {
        switch limit {
        case .loginPerAddress:
            return ("auth:ip:\(clientAddress.resolve(request, context: context))", loginPerAddress, .seconds(60))
        case .loginPerDevice:
            // Beneath the address's limit: one app (or one script) cannot use up a school's shared
            // budget. A malformed device id is not counted; the operation refuses it.
            guard let device = request.uri.queryParameters["device_id"].map(String.init), AuthService.validDeviceID(device) else { return nil }
            return ("auth:device:\(device)", loginPerDevice, .seconds(60))
        case .perUser(let name, let rate, let period):
            // Authentication has refused a protected operation without a valid token already.
            guard case .authenticated(let principal) = context.authentication else { return nil }
            return (Self.userKey(bucket: name, userID: principal.userID), rate, period)
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

    /// 429 `rate_limited` for `what` ("Too many <what>; …"), `Retry-After` rounded up to whole seconds, at least one.
    static func rateLimited(retryAfter seconds: Double, _ what: Phrase.Throttled = .requests) -> APIError {
        let retryAfter = max(1, Int(seconds.rounded(.up)))
        return APIError(
            .rateLimited, .tooMany(what, retryAfterSeconds: retryAfter),
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
