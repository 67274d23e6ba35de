import BFFPlatform
import Foundation

/// `bff push …`: the operator's tools of the Notification Hubs route.
extension Commands {
    /// Devices per transaction of `pushMirrorInstallations` unless told otherwise.
    public static var mirrorBatchSize: Int { InstallationMirror.backfillBatchSize }

    /// Enqueues a `push.installation` job for every device that has a push token, `batchSize`
    /// devices per transaction: run once after switching a deployment that already has devices to
    /// `BFF_PUSH_ROUTE=notification-hubs`, since their registrations, made on the direct route,
    /// enqueued no mirror and the hub has no installation of them. Refused unless the route is the
    /// hub's. Running it again is harmless: each job makes the installation what the database holds
    /// when it runs. `progress` is told the running total after each batch. Returns how many it
    /// enqueued. Reads the database and the route only, like `bff auth revoke`.
    public static func pushMirrorInstallations(
        environment: [String: String], batchSize: Int = Commands.mirrorBatchSize, progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> Int {
        guard batchSize > 0 else { throw ConfigurationError("--batch-size", "must be at least 1") }
        let route = try BaseConfiguration(environment: environment).pushRoute
        guard route == .notificationHubs else {
            throw ConfigurationError(
                "BFF_PUSH_ROUTE",
                "is \(route.rawValue): the hub's installations are mirrored on notification-hubs only; switch the deployment first, then run this with its configuration")
        }
        let database = try operatorDatabase(environment: environment)
        let installations = InstallationMirror(route: route)
        return try await withDatabase(database) { _ in
            try await installations.enqueueEveryDevice(batchSize: batchSize, database: database, progress: progress)
        }
    }
}
