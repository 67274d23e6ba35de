import BFFJobs
import BFFPlatform
import Crypto
import Foundation
import Hummingbird
import Logging
import PostgresNIO

/// RevenueCat's webhook events, kept in an inbox keyed by event id (RevenueCat delivers at least
/// once, repeats ids on retry, keeps no order, and adds event types without notice). An event is
/// never acted on as such: it names the users to re-sync from `GET /subscribers`.
struct RevenueCatInbox: Sendable {
    static let path = "/api/v1/iap/revenuecat/webhook"

    /// What the inbox keeps of one event.
    struct Event: Sendable {
        var id: String
        var type: String
        var environment: String?
        /// Every RevenueCat id the event names.
        var appUserIDs: [String]
        var eventAt: Date?
        var bodyHash: Data
    }

    let database: Database
    let logger: Logger

    /// Keeps `event` and asks for the syncs of the users it names; false when the event was already
    /// kept (a repeat changes nothing).
    ///
    /// One statement, in one round trip (RevenueCat waits for the answer, and webhooks come in
    /// bursts): the users named, the inbox row, and each user's re-sync, coalesced by the stored
    /// function `SubscriptionSync.request` calls too (`bff_request_subscription_syncs`).
    func receive(_ event: Event, now: Date = Date()) async throws -> Bool {
        // RevenueCat's ids map to users only through the user's own id, which the app logs in with;
        // aliases and anonymous ids name no user here.
        let candidates = Array(Set(event.appUserIDs.compactMap { UUID(uuidString: $0) }))
        let window = SubscriptionSync.windowNumber(at: now)
        return try await database.run { client in
            for try await stored in try await client.query(
                """
                WITH named AS (
                    SELECT coalesce(array_agg(id ORDER BY id), '{}'::uuid[]) AS users FROM users WHERE id = ANY(\(candidates))
                ), stored AS (
                    INSERT INTO revenuecat_events (event_id, type, environment, app_user_ids, pending_users, event_at, body_hash, processed_at)
                    SELECT \(event.id), \(event.type), \(event.environment), \(event.appUserIDs), named.users, \(event.eventAt), \(event.bodyHash),
                           CASE WHEN cardinality(named.users) = 0 THEN now() END
                    FROM named
                    ON CONFLICT (event_id) DO NOTHING
                    RETURNING pending_users
                )
                SELECT EXISTS (SELECT 1 FROM stored),
                       (SELECT bff_request_subscription_syncs(
                            pending_users, \(SubscriptionSync.Reason.webhook.rawValue), \(window), \(SubscriptionSync.window),
                            \(SubscriptionSync.kind), \(JobQueue.channel))
                        FROM stored) IS NOT NULL
                """, logger: logger
            ).decode((Bool, Bool).self) { return stored.0 }
            return false
        }
    }
}

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
            throw APIError(.storeUnavailable, "The RevenueCat webhook is not configured on this server (BFF_REVENUECAT_WEBHOOK_AUTH).")
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
