import BFFPlatform
import Crypto
import Foundation
import Logging

/// API-050: a purchase or restore from the app. The receipt goes to RevenueCat for the caller, then
/// the caller's state is read back from RevenueCat's snapshot and stored; the answer is the caller's
/// entitlement. Nothing is written unless both calls succeed.
struct PurchaseVerification: Sendable {
    let sync: SubscriptionSync
    let limiter: RateLimiter

    /// Calls per user: a restore button pressed repeatedly must not spend RevenueCat's budget.
    static let rate = 10
    static let period: Duration = .seconds(60)

    var store: SubscriptionStore { sync.store }
    var logger: Logger { sync.logger }

    func verify(userID: UUID, platform: String, productID: String, receipt: String) async throws -> SubscriptionStore.View {
        guard let client = sync.client else { throw PurchaseRefusal.notConfigured }
        let decision = try await limiter.limit(key: "iap:verify:\(userID.uuidString.lowercased())", rate: Self.rate, per: Self.period)
        guard decision.allowed else { throw PurchaseRefusal.rateLimited(decision) }
        let appUserID = userID.uuidString.lowercased()
        let hash = Data(SHA256.hash(data: Data(receipt.utf8)))
        do {
            try await client.postReceipt(appUserID: appUserID, platform: platform, fetchToken: receipt, productID: productID)
        } catch {
            throw answer(for: error)
        }
        do {
            // A second early: this clock against the database's, which timed the webhook events.
            let asked = Date().addingTimeInterval(-1)
            let snapshot = try await client.subscriber(appUserID: appUserID)
            try await store.apply(snapshot, userID: userID, receipt: .init(productID: productID, platform: platform, hash: hash), asked: asked)
        } catch let failure as RevenueCatFailure {
            // RevenueCat holds the purchase now: a re-sync stores it even if the app never retries.
            try? await store.database.run { client in
                try await client.withConnection { connection in
                    try await SubscriptionSync.request([userID], reason: .verify, on: connection, logger: logger)
                }
            }
            throw answer(for: failure)
        }
        logger.info("purchase verified", metadata: ["platform": .string(platform), "product_id": .string(productID)])
        return try await store.view(userID: userID)
    }

    private func answer(for failure: RevenueCatFailure) -> PurchaseRefusal {
        switch failure {
        case .refused(let reason):
            logger.notice("RevenueCat refused a receipt", metadata: ["reason": .string(reason)])
            return .receiptRefused
        case .unavailable(let reason, let retryAfter):
            logger.warning("RevenueCat unavailable", metadata: ["reason": .string(reason)])
            let seconds = retryAfter.map { max(1, Int($0.seconds.rounded(.up))) } ?? 5
            return .storeUnavailable(retryAfterSeconds: seconds)
        case .misconfigured(let reason):
            logger.error("RevenueCat refused our request; check BFF_REVENUECAT_API_KEY and BFF_REVENUECAT_BASE_URL", metadata: ["reason": .string(reason)])
            return .storeUnavailable(retryAfterSeconds: 60)
        }
    }
}

/// Why a purchase was not verified (the answers are in `SubscriptionHandlers.swift`).
enum PurchaseRefusal: Error, Equatable {
    /// No RevenueCat client on this server (`BFF_REVENUECAT_API_KEY`).
    case notConfigured
    /// Too many verifications in the per-user window.
    case rateLimited(RateLimiter.Decision)
    /// RevenueCat, or the store behind it, refused the receipt.
    case receiptRefused
    /// RevenueCat is down, or refuses our request: the app asks again after `retryAfterSeconds`.
    case storeUnavailable(retryAfterSeconds: Int)
}
