import BFFPlatform
import Foundation
import HTTPTypes
import Hummingbird

/// The levers an app team pulls without a release, applied before anything else of a request runs:
/// maintenance mode (503 `maintenance` with `Retry-After`) and the forced update (426
/// `upgrade_required` for an app below its platform's minimum). Revocations and purchases are never
/// turned away, nor the probes, the metrics, the contract and the configuration the app reads to
/// learn why; a login may always finish, so the update applies from the next call. What each
/// operation is open to is its policy's `gate` (`OperationTable`).
struct ServiceGateMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let config: RemoteConfigSource

    static let clientHeader = HTTPField.Name("X-Client")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.client = ClientIdentity(header: request.headers[Self.clientHeader])
        guard let gate = context.operation?.policy.gate, gate != .open else { return try await next(request, context) }
        let remote = config.current()
        let now = Date()
        if remote.maintenance.isOn(at: now) {
            let seconds = remote.maintenance.until.map { max(1, Int($0.timeIntervalSince(now).rounded(.up))) } ?? 300
            throw APIError(.maintenance, remote.maintenance.message.map(Phrase.announcement), headers: [.retryAfter: String(seconds)])
        }
        // An unreadable or absent X-Client is served: the web sends none, and a broken header must
        // not lock an app out. Only a version known to be too old is refused.
        if gate == .all, let client = context.client,
            let platform = client.platform, let version = client.version, let minimum = remote.platforms[platform]?.minSupported, version < minimum
        {
            throw APIError(.upgradeRequired, .appVersionUnsupported(version: "\(version)", minimum: "\(minimum)"))
        }
        return try await next(request, context)
    }
}
