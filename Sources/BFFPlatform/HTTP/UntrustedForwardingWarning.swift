import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// Warns, once a minute at most, that requests carry `X-Forwarded-For` from a peer that is not a
/// trusted proxy. Behind a load balancer with `BFF_TRUSTED_PROXIES` unset, every client's limits
/// are keyed on the balancer's address and all of them share one bucket: this says so in the log
/// before a school finds itself refused.
package struct UntrustedForwardingWarning<Context: PlatformRequestContext>: RouterMiddleware {
    let clientAddress: ClientAddress
    let logger: Logger
    let interval: Duration
    private let lastWarning = NIOLockedValueBox<ContinuousClock.Instant?>(nil)

    package init(clientAddress: ClientAddress, logger: Logger, interval: Duration = .seconds(60)) {
        self.clientAddress = clientAddress
        self.logger = logger
        self.interval = interval
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.headers[.xForwardedFor] != nil {
            let peer = context.remoteAddress?.ipAddress
            if !clientAddress.isTrustedPeer(peer), shouldWarn() {
                logger.warning(
                    "X-Forwarded-For from a peer that is not a trusted proxy is ignored: every client behind it shares its rate limits; set BFF_TRUSTED_PROXIES to the proxy's addresses",
                    metadata: ["event": "untrusted_forwarded_for", "peer": .string(peer ?? "unknown")])
            }
        }
        return try await next(request, context)
    }

    private func shouldWarn() -> Bool {
        let now = ContinuousClock.now
        return lastWarning.withLockedValue { last in
            if let last, now - last < interval { return false }
            last = now
            return true
        }
    }
}
