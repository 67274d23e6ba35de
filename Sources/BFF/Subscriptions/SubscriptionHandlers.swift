import BFFAPI
import BFFPlatform
import Crypto
import Foundation
import HTTPTypes
import OpenAPIRuntime

/// The subscription operations of the contract (API-050, JOB-003's webhook, `/me/subscription`).
extension APIService {
    /// The contract's `receipt.maxLength`: the whole body, with the other fields and `/` escaped,
    /// stays under the 64 KiB body cap.
    static let receiptMaxLength = 60_000

    func verifyPurchase(_ input: Operations.VerifyPurchase.Input) async throws -> Operations.VerifyPurchase.Output {
        let principal = try AppRequestContext.principal()
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        // The contract's limits, which the generated decoder does not check.
        guard (1...200).contains(body.productId.utf8.count), Self.only(body.productId, plus: "._-") else {
            throw APIError.validation("product_id", .productIDShape)
        }
        guard (1...Self.receiptMaxLength).contains(body.receipt.utf8.count), Self.only(body.receipt, plus: "+/=._-") else {
            throw APIError.validation("receipt", .receiptShape)
        }
        let view = try await purchases.verify(
            userID: principal.userID, platform: body.platform.rawValue, productID: body.productId, receipt: body.receipt)
        return .ok(.init(body: .json(view.schema)))
    }

    /// Whether `text` is ASCII letters and digits and the characters of `plus` only.
    private static func only(_ text: String, plus: String) -> Bool {
        text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || plus.utf8.contains(byte)
        }
    }

    func getSubscription(_ input: Operations.GetSubscription.Input) async throws -> Operations.GetSubscription.Output {
        let principal = try AppRequestContext.principal()
        return .ok(.init(body: .json(try await subscriptions.view(userID: principal.userID).schema)))
    }

    func revenueCatWebhook(_ input: Operations.RevenueCatWebhook.Input) async throws -> Operations.RevenueCatWebhook.Output {
        // The Authorization header was checked before the body was read (WebhookAuthorizationMiddleware).
        guard case .json(let body) = input.body else { throw APIError.validation("body", .mustBeJSON) }
        let event = body.event
        guard (1...200).contains(event.id.utf8.count) else { throw APIError.validation("event.id", .lengthBetween(1, 200)) }
        guard (1...100).contains(event._type.utf8.count) else { throw APIError.validation("event.type", .lengthBetween(1, 100)) }
        let fields = event.additionalProperties.value
        func text(_ key: String) -> String? { (fields[key] ?? nil) as? String }
        func texts(_ key: String) -> [String] { ((fields[key] ?? nil) as? [(any Sendable)?])?.compactMap { $0 as? String } ?? [] }
        // Every id the event names, both sides of a transfer included; bounded, as RevenueCat's ids are.
        let ids =
            ([text("app_user_id"), text("original_app_user_id")].compactMap { $0 }
            + texts("aliases") + texts("transferred_from") + texts("transferred_to"))
            .filter { (1...1_500).contains($0.utf8.count) }
        let millis = (fields["event_timestamp_ms"] ?? nil).flatMap { ($0 as? Int).map(Double.init) ?? ($0 as? Double) }
        let canonical = (try? JSONEncoder.sortedKeys.encode(body)) ?? Data()
        let stored = try await inbox.receive(
            .init(
                id: event.id, type: event._type, environment: text("environment").map { String($0.prefix(32)) },
                appUserIDs: Array(Set(ids)).sorted().prefix(100).map { $0 },
                eventAt: millis.map { Date(timeIntervalSince1970: $0 / 1000) }, bodyHash: Data(SHA256.hash(data: canonical))))
        inbox.logger.info(
            "RevenueCat event", metadata: ["event_id": .string(event.id), "type": .string(event._type), "duplicate": .stringConvertible(!stored)])
        return .ok(.init(body: .json(.init(status: stored ? .stored : .duplicate))))
    }
}

extension PurchaseRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .notConfigured: APIError(.storeUnavailable, .purchasesNotConfigured)
        case .rateLimited(let decision): APIError.rateLimited(decision)
        case .receiptRefused: APIError(.invalidReceipt)
        case .storeUnavailable(let seconds): APIError(.storeUnavailable, headers: [.retryAfter: String(seconds)])
        }
    }
}

extension PlanRefusal: DomainError {
    var apiError: APIError {
        switch self {
        case .planRequired(let feature, let needed):
            let what: Phrase.PlanFeature =
                switch feature {
                case .instantQuestion: .instantQuestions
                }
            return APIError(.planRequired, .featureNeedsPlan(what, plan: needed.rawValue))
        case .quotaExhausted(let plan, let allowed, let secondsLeft):
            // Until the learner's day ends, at least a second.
            return APIError(
                .quotaExceeded, .dailyTurnsUsed(plan: plan.rawValue, allowed: allowed),
                headers: [.retryAfter: String(max(1, Int(secondsLeft.rounded(.up))))])
        }
    }
}

extension JSONEncoder {
    fileprivate static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension SubscriptionStore.Row {
    /// Every store's subscription alike; `platform` only for the two app stores' (absent for the web's and a promotional grant).
    var schema: Components.Schemas.Subscription {
        .init(
            productId: facts.productID, status: .init(rawValue: status.rawValue) ?? .expired,
            store: Components.Schemas.Subscription.StorePayload(rawValue: facts.store) ?? .promotional,
            platform: facts.platform.flatMap { Components.Schemas.Subscription.PlatformPayload(rawValue: $0) },
            expiresAt: facts.expiresAt, willRenew: willRenew, managementUrl: facts.managementURL)
    }
}

extension SubscriptionStore.View {
    var schema: Components.Schemas.Entitlement {
        .init(
            plan: .init(rawValue: entitlement.plan.rawValue) ?? .free, status: entitlement.status.flatMap { .init(rawValue: $0.rawValue) },
            accessUntil: entitlement.accessUntil, subscriptions: subscriptions.map(\.schema))
    }
}
