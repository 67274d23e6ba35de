import BFFPlatform
import Foundation
import Hummingbird
import Logging
import Metrics
import NIOConcurrencyHelpers

/// Keeps what `X-Client` says on the caller's device (model, OS version, app version, platform,
/// last seen), written at most once a minute per device and process, and across processes only when
/// it changed or a minute has passed and never on the request's path; and
/// counts requests by platform and app version for the metrics, a bounded set of labels.
final class DeviceSightings: Sendable {
    private let database: Database
    private let logger: Logger
    private let written = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])
    private let versions = NIOLockedValueBox<Set<String>>([])
    static let interval: Duration = .seconds(60)
    /// Distinct app versions a process labels; later ones are counted as `other`.
    static let versionLabels = 50

    init(database: Database, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    func saw(_ client: ClientIdentity, principal: Principal?) {
        Counter(label: "bff_client_requests_total", dimensions: [("platform", client.platform?.rawValue ?? "unknown"), ("app_version", label(client.version))])
            .increment()
        // The web's session has no device to record.
        guard let principal, let deviceID = principal.deviceID else { return }
        let now = ContinuousClock.now
        let due = written.withLockedValue { written -> Bool in
            if let last = written[deviceID], now - last < Self.interval { return false }
            if written.count > 10_000 { written = written.filter { now - $0.value < Self.interval } }
            written[deviceID] = now
            return true
        }
        guard due else { return }
        let (database, logger) = (database, logger)
        Task {
            do {
                try await database.run { postgres in
                    // A device another account holds is left alone: signing in there is what moves it.
                    _ = try await postgres.query(
                        """
                        INSERT INTO devices AS d (device_id, user_id, model, os_version, app_version, platform)
                        VALUES (\(deviceID), \(principal.userID), \(client.model), \(client.osVersion), \(client.version?.description),
                                \(client.platform?.rawValue))
                        ON CONFLICT (device_id) DO UPDATE SET
                            model = coalesce(excluded.model, d.model), os_version = coalesce(excluded.os_version, d.os_version),
                            app_version = coalesce(excluded.app_version, d.app_version), platform = coalesce(excluded.platform, d.platform),
                            last_seen_at = now()
                        WHERE d.user_id = excluded.user_id
                          AND (d.last_seen_at < now() - interval '1 minute'
                               OR (d.model, d.os_version, d.app_version, d.platform) IS DISTINCT FROM
                                  (coalesce(excluded.model, d.model), coalesce(excluded.os_version, d.os_version),
                                   coalesce(excluded.app_version, d.app_version), coalesce(excluded.platform, d.platform)))
                        """, logger: logger)
                }
            } catch {
                logger.debug("recording a device's X-Client failed", metadata: ["error": .string(LoggableError.describe(error))])
            }
        }
    }

    private func label(_ version: AppVersion?) -> String {
        guard let text = version?.description else { return "unknown" }
        return versions.withLockedValue { known in
            if known.contains(text) { return text }
            guard known.count < Self.versionLabels else { return "other" }
            known.insert(text)
            return text
        }
    }
}

/// Hands each request's `X-Client` (read by `ServiceGateMiddleware`) to `DeviceSightings`, once authentication knows whose device it is.
struct ClientIdentityMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let sightings: DeviceSightings

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let client = context.client {
            if case .authenticated(let principal) = context.authentication {
                sightings.saw(client, principal: principal)
            } else {
                sightings.saw(client, principal: nil)
            }
        }
        return try await next(request, context)
    }
}
