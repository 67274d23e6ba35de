import Hummingbird
import Logging
import NIOCore

/// The per-request context: Hummingbird's core storage plus what the platform middleware learns.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The `X-Request-Id` echoed or generated for this request.
    public var requestID: String
    /// The peer's address; see `ClientAddress` for proxies.
    public let remoteAddress: SocketAddress?
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

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        requestID = ""
        remoteAddress = source.channel.remoteAddress
    }

    /// Generated OpenAPI handlers receive no context argument; the middleware publishes it here.
    @TaskLocal public static var current: AppRequestContext?
}
