import BFFPlatform
import Hummingbird
import Logging
import NIOCore

/// The per-request context: Hummingbird's core storage plus what the platform middleware learns.
public struct AppRequestContext: RequestContext, PlatformRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The `X-Request-Id` echoed or generated for this request.
    public var requestID: String
    /// The peer's address; see `ClientAddress` for proxies.
    public let remoteAddress: SocketAddress?
    /// The connection, to stop reading from it when the answer is given before the body was read.
    package let channel: any Channel
    /// The operation the router matched and its policy (`OperationResolutionMiddleware`); nil for a
    /// request no operation takes, which is refused before any policy step.
    var operation: Operation?
    /// Set for a request with a body: whether the body has been read (`UnreadBodyMiddleware`).
    package var bodyRead: BodyReadMark?
    /// Set by `AuthenticationMiddleware`; read by the operations through `Authorization`.
    public var authentication: Authentication = .anonymous
    /// The `Idempotency-Key` as sent: the generated code percent-decodes header values, which
    /// turned a valid key such as `100%` into "" and made `a%41` the same key as `aA`.
    public var idempotencyKey: String?
    /// Whether the request's `Accept` names `text/event-stream` itself. The generated input cannot
    /// tell: without an `Accept` header it lists every content type the operation offers.
    public var acceptsEventStream = false
    /// The app's `X-Client`, read once by `ServiceGateMiddleware`; nil when absent or unreadable.
    var client: ClientIdentity?
    public var requestedLanguage: Language?
    /// The answer's language as far as it is known without asking the database; see `answerLanguage()`.
    public var language: Language = .default
    /// Set by `LearnerLanguageMiddleware` when only the learner's setting, not yet read, can say.
    var pendingLanguage: PendingLearnerLanguage?

    package var route: MatchedRoute? { operation?.route }

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        requestID = ""
        remoteAddress = source.channel.remoteAddress
        channel = source.channel
    }

    /// Generated OpenAPI handlers receive no context argument; the middleware publishes it here.
    @TaskLocal public static var current: AppRequestContext?

    /// The learner the request acts for. `AuthenticationMiddleware` has already refused a request
    /// for a protected operation without a valid token carrying the operation's scopes; this
    /// refuses again, never trusting that a handler is reached only through it.
    func principal() throws -> Principal {
        // A handler of an operation that takes no AppJWT asking for one is a bug, not the client's fault.
        guard let operation, !operation.policy.scopes.isEmpty else { throw APIError.internalError }
        guard case .authenticated(let principal) = authentication else { throw authentication.refusal ?? APIError.invalidToken() }
        if let missing = operation.policy.scopes.first(where: { !principal.has(scope: $0.rawValue) }) {
            throw APIError.insufficientScope([missing])
        }
        return principal
    }

    /// The language to word this answer in: `Accept-Language`'s, else the learner's setting (read
    /// now if this replica does not know it), else the default.
    func answerLanguage() async -> Language {
        if requestedLanguage == nil, let pendingLanguage { return await pendingLanguage.language(logger: logger) }
        return language
    }

    /// The language to word `error` in: `answerLanguage()`, except that a dependency's outage
    /// (503) never reads the learner's setting: the database may be what is down, and the answer
    /// must not wait on it a second time.
    func errorLanguage(for error: any Error) async -> Language {
        if pendingLanguage?.known == nil, ErrorMapping.apiError(for: error)?.status == .serviceUnavailable { return language }
        return await answerLanguage()
    }

    /// The answer's language when it is known without reading the learner's setting.
    var knownLanguage: Language? {
        if let requestedLanguage { return requestedLanguage }
        guard let pendingLanguage else { return language }
        return pendingLanguage.known
    }

    /// The answer's language when a read brought the learner's setting along (`setting`: nil
    /// without settings): the one already known, else that setting, which the pending read then
    /// need not make; else the default. A learner this replica has not cached costs no statement.
    func answerLanguage(readAlong setting: Language?) -> Language {
        let language = knownLanguage ?? setting ?? .default
        pendingLanguage?.learned(language)
        return language
    }

    /// `answerLanguage()` of the request a generated handler runs for.
    static func answerLanguage() async -> Language {
        await current?.answerLanguage() ?? .default
    }

    /// `principal()` of the request a generated handler runs for.
    static func principal() throws -> Principal {
        guard let current else { throw APIError.invalidToken() }
        return try current.principal()
    }
}
