import BFFPlatform
import HTTPTypes

/// Every operation the server answers and its policy: the contract's operations (a test holds
/// their ids, methods, paths and security against openapi.yaml), the two it serves natively (the
/// chat list, the export), and the routes beside the contract (the API reference; metrics are on the admin listener).
/// The one place where a route's authentication, limits, gate, media types and tracing are
/// written; the request's operation is resolved once (`OperationResolutionMiddleware`).
enum OperationTable {
    static let all: [Operation] = contract + beside

    /// The contract's operations, in its order.
    static let contract: [Operation] = [
        Operation(id: "getHealthz", method: .get, path: "/healthz", policy: .probe),
        Operation(id: "getOpenAPIDocument", method: .get, path: "/openapi.yaml", policy: .init(access: .anyone, gate: .open, answers: .anything)),
        Operation(id: "getReadyz", method: .get, path: "/readyz", policy: .probe),
        Operation(
            id: "authStart", method: .get, path: "/api/v1/auth/start",
            policy: .init(access: .anyone, gate: .maintenanceOnly, rateLimits: [.loginPerAddress, .loginPerDevice])),
        Operation(
            id: "authCallback", method: .get, path: "/api/v1/auth/callback",
            policy: .init(access: .anyone, gate: .maintenanceOnly, rateLimits: [.loginPerAddress])),
        // Not per address: many learners behind one school's or carrier's address refresh every 15
        // minutes; the 256-bit token and its per-session limit (in the operation) bound it.
        Operation(id: "authRefresh", method: .post, path: "/api/v1/auth/refresh", policy: .init(access: .anyone, gate: .maintenanceOnly)),
        Operation(
            id: "authLogout", method: .post, path: "/api/v1/auth/logout",
            policy: .init(access: .scopes([.profileRead]), gate: .maintenanceOnly, rateLimits: [.loginPerAddress])),
        // The IdP's back-channel logouts come from its few addresses for every user, and one refused
        // is a session left signed in: never limited, never gated, answered whatever it accepts.
        Operation(
            id: "authBackchannelLogout", method: .post, path: "/api/v1/auth/backchannel-logout",
            policy: .init(access: .anyone, gate: .open, answers: .anything)),
        Operation(id: "getMe", method: .get, path: "/api/v1/me", policy: .init(access: .scopes([.profileRead]))),
        // Deleting the account takes a session as wide as a sign-in, the app's or the web's (every
        // scope but push:register, which only a device has): a token narrowed for an operator or a
        // tool cannot delete a learner.
        Operation(id: "deleteMe", method: .delete, path: "/api/v1/me", policy: .init(access: .scopes([.profileRead, .chatRW, .iapVerify]))),
        // The export is every chat's messages: it reads chats, so it needs chat:rw too.
        Operation(
            id: "exportMe", method: .get, path: "/api/v1/me/export",
            policy: .init(
                access: .scopes([.profileRead, .chatRW]), rateLimits: [.perUser(bucket: "export", rate: 2, period: .seconds(60))], streams: true)),
        Operation(id: "getSubscription", method: .get, path: "/api/v1/me/subscription", policy: .init(access: .scopes([.profileRead]))),
        // Achievements are counted from chats: chat:rw besides profile:read, as the export.
        Operation(id: "getAchievements", method: .get, path: "/api/v1/me/achievements", policy: .init(access: .scopes([.profileRead, .chatRW]))),
        Operation(id: "getAppConfig", method: .get, path: "/api/v1/app-config", policy: .init(access: .anyone, gate: .open)),
        Operation(id: "listDevices", method: .get, path: "/api/v1/devices", policy: .init(access: .scopes([.profileRead]))),
        Operation(id: "deleteDevice", method: .delete, path: "/api/v1/devices/{device_id}", policy: .init(access: .scopes([.profileRead]))),
        Operation(id: "listChats", method: .get, path: "/api/v1/chats", policy: .init(access: .scopes([.chatRW]))),
        Operation(
            id: "createChat", method: .post, path: "/api/v1/chats",
            policy: .init(access: .scopes([.chatRW]), rateLimits: [.perUser(bucket: "chats.create", rate: 60, period: .seconds(60))])),
        Operation(id: "getChat", method: .get, path: "/api/v1/chats/{chat_id}", policy: .init(access: .scopes([.chatRW]))),
        Operation(
            id: "renameChat", method: .patch, path: "/api/v1/chats/{chat_id}",
            policy: .init(access: .scopes([.chatRW]), rateLimits: [chatChanges])),
        Operation(
            id: "deleteChat", method: .delete, path: "/api/v1/chats/{chat_id}",
            policy: .init(access: .scopes([.chatRW]), rateLimits: [chatChanges])),
        Operation(id: "listMessages", method: .get, path: "/api/v1/chats/{chat_id}/messages", policy: .init(access: .scopes([.chatRW]))),
        Operation(id: "evaluateChat", method: .post, path: "/api/v1/chats/{chat_id}/evaluation", policy: .init(access: .scopes([.chatRW]))),
        Operation(id: "listChatTags", method: .get, path: "/api/v1/chats/{chat_id}/tags", policy: .init(access: .scopes([.chatRW]))),
        Operation(id: "getSettings", method: .get, path: "/api/v1/settings", policy: .init(access: .scopes([.chatRW]))),
        Operation(
            id: "replaceSettings", method: .put, path: "/api/v1/settings",
            policy: .init(access: .scopes([.chatRW]), rateLimits: [.perUser(bucket: "settings.replace", rate: 30, period: .seconds(60))])),
        Operation(id: "listSubjects", method: .get, path: "/api/v1/subjects", policy: .init(access: .scopes([.chatRW]))),
        // The turn's own limit (5 per 10 s) is taken with its quota reservation, in the operation.
        Operation(id: "chatTurn", method: .post, path: "/api/v1/chat", policy: .init(access: .scopes([.chatRW]), answers: .jsonOrEventStream, streams: true)),
        Operation(id: "listRecalls", method: .get, path: "/api/v1/recalls", policy: .init(access: .scopes([.chatRW]))),
        Operation(id: "getRecall", method: .get, path: "/api/v1/recalls/{recall_id}", policy: .init(access: .scopes([.chatRW]))),
        Operation(id: "markRecallOpened", method: .post, path: "/api/v1/recalls/{recall_id}/opened", policy: .init(access: .scopes([.chatRW]))),
        Operation(
            id: "evaluateRecall", method: .post, path: "/api/v1/recalls/{recall_id}/evaluation", policy: .init(access: .scopes([.chatRW]))),
        Operation(
            id: "registerPushToken", method: .post, path: "/api/v1/push/register",
            policy: .init(access: .scopes([.pushRegister]), rateLimits: [.perUser(bucket: "push.register", rate: 30, period: .seconds(60))])),
        Operation(id: "unregisterPushToken", method: .post, path: "/api/v1/push/unregister", policy: .init(access: .scopes([.pushRegister]))),
        // Purchases are never turned away by maintenance or the forced update: a paid purchase must reach the server.
        Operation(id: "verifyPurchase", method: .post, path: "/api/v1/iap/verify", policy: .init(access: .scopes([.iapVerify]), gate: .open)),
        Operation(
            id: "revenueCatWebhook", method: .post, path: "/api/v1/iap/revenuecat/webhook",
            policy: .init(access: .revenueCatWebhook, gate: .open)),
    ]

    /// Routes the server answers beside the contract.
    static let beside: [Operation] = [
        Operation(id: "getAPIReference", method: .get, path: apiReferencePath, policy: .apiReference),
        Operation(id: "getAPIReferenceFile", method: .get, path: apiReferencePath + "/**", policy: .apiReference),
    ]

    static let apiReferencePath = "/docs"

    /// Every per-user rate limit's bucket, once each.
    static let userBuckets: [String] = Array(
        Set(
            all.flatMap { $0.policy.rateLimits }.compactMap { limit -> String? in
                if case .perUser(let bucket, _, _) = limit { return bucket }
                return nil
            })
    ).sorted()

    /// Renames and deletions share one budget: an app syncing an offline queue sends both.
    private static let chatChanges = OperationPolicy.RateLimit.perUser(bucket: "chats.change", rate: 120, period: .seconds(60))

    static let index = OperationIndex(all)

    static func operation(id: String) -> Operation? {
        all.first { $0.id == id }
    }
}

extension OperationPolicy {
    /// Liveness and readiness: asked every few seconds by the orchestrator, never turned away.
    static let probe = OperationPolicy(access: .anyone, gate: .open, traced: false)
    /// The API reference's page and files (`BFF_API_DOCS_DIR`).
    static let apiReference = OperationPolicy(access: .anyone, gate: .open, answers: .anything)
}
