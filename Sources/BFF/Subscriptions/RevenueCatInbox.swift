import BFFJobs
import BFFPlatform
import Foundation
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
