import BFFPlatform
import Crypto
import Foundation
import Hummingbird

/// The webhook's credential: RevenueCat sends the `Authorization` value set in its dashboard and no
/// signature. It is checked for every operation whose policy names it (whatever the path's
/// spelling), before the body is read, so a caller without it learns nothing about what the body
/// should be, and nothing is stored.
struct WebhookAuthorizationMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    /// `BFF_REVENUECAT_WEBHOOK_AUTH`; nil refuses every delivery with 503 (RevenueCat retries it).
    let expected: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.operation?.policy.access == .revenueCatWebhook else { return try await next(request, context) }
        guard let expected else {
            throw APIError(.storeUnavailable, .webhookNotConfigured)
        }
        guard let given = request.headers[.authorization], Self.same(given, expected) else { throw APIError(.webhookUnauthorized) }
        return try await next(request, context)
    }

    /// Compares in time independent of where the values differ (their digests have one length).
    static func same(_ given: String, _ expected: String) -> Bool {
        let left = SHA256.hash(data: Data(given.utf8))
        let right = SHA256.hash(data: Data(expected.utf8))
        var difference: UInt8 = 0
        for (a, b) in zip(left, right) { difference |= a ^ b }
        return difference == 0
    }
}
