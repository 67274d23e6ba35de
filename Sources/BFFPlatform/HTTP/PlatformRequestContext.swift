import Hummingbird
import NIOCore

/// What the platform's middleware read and write on a request's context. The app's context conforms
/// and adds what its features learn (the caller's credentials, the app's identity): the platform's
/// steps are generic over it, so they cannot reach a feature.
package protocol PlatformRequestContext: RequestContext {
    /// The `X-Request-Id` echoed or generated for this request (`RequestIDMiddleware`).
    var requestID: String { get set }
    /// The peer's address; see `ClientAddress` for proxies.
    var remoteAddress: SocketAddress? { get }
    /// The connection, to stop reading from it when the answer is given before the body was read.
    var channel: any Channel { get }
    /// Set for a request with a body: whether the body has been read (`UnreadBodyMiddleware`).
    var bodyRead: BodyReadMark? { get set }
    /// The operation the router matched, as the platform's steps name it: its id and route template
    /// (`/api/v1/chats/{chat_id}`, never the raw path); nil when no operation takes the request.
    var route: MatchedRoute? { get }
    /// The language `Accept-Language` asks for, when it names one the server speaks (`ErrorMiddleware`).
    var requestedLanguage: Language? { get set }
    /// The language the answer is written in: the requested one, else the learner's setting once
    /// the caller is known, else the default.
    var language: Language { get set }
}

/// The operation a request was routed to, as metrics, traces and content negotiation see it.
package struct MatchedRoute: Sendable {
    /// The contract's `operationId`, or a name of the same style for a route beside the contract.
    package let operationID: String
    /// The path template exactly as the router registers it.
    package let template: String
    /// What the client may ask for in `Accept` (`AcceptMiddleware`).
    package let answers: Answers
    /// Whether a request makes a server span: probes and scrapes, asked every few seconds, would bury
    /// the requests.
    package let traced: Bool

    package init(operationID: String, template: String, answers: Answers, traced: Bool) {
        self.operationID = operationID
        self.template = template
        self.answers = answers
        self.traced = traced
    }
}

/// The answers a client may ask for in `Accept` (`AcceptMiddleware`).
package enum Answers: Sendable, Equatable {
    case json
    /// JSON, or server-sent events when `Accept` names `text/event-stream`.
    case jsonOrEventStream
    /// Whatever the client accepts: Prometheus negotiates its own formats, an IdP's back-channel
    /// logout gets an empty 200 whatever it accepts, files are what they are.
    case anything
}
