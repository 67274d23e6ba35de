import BFFPlatform
import HTTPTypes

/// The scopes an AppJWT can carry (the requirements' four; no other is ever issued).
public enum Scope: String, CaseIterable, Sendable {
    case profileRead = "profile:read"
    case chatRW = "chat:rw"
    case pushRegister = "push:register"
    case iapVerify = "iap:verify"
}

/// Everything a request's handling decides from the route, in one value per operation: the steps
/// before the handler read it from the context (`AppRequestContext.operation`) and never look at
/// the path, which the router normalises (`//a/b/` reaches `/a/b`) and a string compare would not.
struct OperationPolicy: Sendable, Equatable {
    /// Who may call the operation.
    enum Access: Sendable, Equatable {
        /// No token needed (login, refresh and logout tokens are the operation's own credential).
        case anyone
        /// A valid AppJWT carrying every one of these scopes.
        case scopes([Scope])
        /// RevenueCat's configured `Authorization` value (`BFF_REVENUECAT_WEBHOOK_AUTH`).
        case revenueCatWebhook
    }

    /// What remote configuration may turn away (`ServiceGateMiddleware`).
    enum Gate: Sendable, Equatable {
        /// Served in maintenance and to old apps: probes, the contract, the configuration the app
        /// reads to learn why, revocations and purchases.
        case open
        /// Maintenance applies; the forced update does not, so a login may always finish.
        case maintenanceOnly
        /// Maintenance and the forced update both apply.
        case all
    }

    /// A limit counted before the handler (`RateLimitMiddleware`).
    enum RateLimit: Sendable, Equatable {
        /// Per client address, at `BFF_AUTH_RATE_LIMIT` a minute (logins and logout).
        case loginPerAddress
        /// Per device id, at `BFF_AUTH_DEVICE_RATE_LIMIT` a minute (login starts).
        case loginPerDevice
        /// Per authenticated learner: `rate` requests per `period`, counted in `bucket` (operations
        /// sharing a bucket share the count).
        case perUser(bucket: String, rate: Int, period: Duration)
    }

    var access: Access
    var gate: Gate = .all
    var answers: Answers = .json
    var rateLimits: [RateLimit] = []
    /// Whether a request makes a server span: probes and scrapes, asked every few seconds, would
    /// bury the requests.
    var traced = true
    /// Whether the answer may stream for long after the handler returned (the turn's events, the
    /// export): its handling then runs in a task of its own (`StreamedAnswerTaskMiddleware`).
    var streams = false

    /// The scopes the operation needs; empty for one that takes no AppJWT.
    var scopes: [Scope] {
        if case .scopes(let scopes) = access { return scopes }
        return []
    }
}

/// One operation of the contract (or a route served beside it) and its policy. A class: every
/// request's context holds its operation, and every step's frame holds copies of the context, so
/// one reference in place of its strings and arrays made each of those copies 106 bytes smaller
/// and several retains cheaper (docs/architecture.md, "The fast path").
final class Operation: Sendable {
    /// The contract's `operationId`; for routes outside the contract a name of the same style.
    let id: String
    let method: HTTPRequest.Method
    /// The path template exactly as the router registers it (`/api/v1/chats/{chat_id}`).
    let path: String
    let policy: OperationPolicy
    /// The operation as the platform's steps see it (metrics, traces, `Accept`), made once.
    let route: MatchedRoute

    init(id: String, method: HTTPRequest.Method, path: String, policy: OperationPolicy) {
        self.id = id
        self.method = method
        self.path = path
        self.policy = policy
        self.route = MatchedRoute(operationID: id, template: path, answers: policy.answers, traced: policy.traced)
    }
}

/// Operations by route template and method, as the router reports a matched route.
struct OperationIndex: Sendable {
    private let byRoute: [String: [HTTPRequest.Method: Operation]]

    init(_ operations: [Operation]) {
        byRoute = Dictionary(grouping: operations, by: \.path).mapValues { operations in
            Dictionary(uniqueKeysWithValues: operations.map { ($0.method, $0) })
        }
    }

    /// The operation of a route the router matched (`endpointPath` is its template), nil when none.
    func operation(route: String, method: HTTPRequest.Method) -> Operation? {
        byRoute[route]?[method]
    }
}
