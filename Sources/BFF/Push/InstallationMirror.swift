import BFFJobs
import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// What a change of push tokens enqueues on the Notification Hubs route: one `push.installation`
/// job per device whose token it changed, in the change's own transaction, so that the hub learns
/// of every change even when it is down at the time (the job retries until it answers).
///
/// The job carries the device's id only and reads the device's token when it runs
/// (`InstallationMirrorJob`): `bff_enqueue_jobs` keeps a unique key for as long as the job's row is
/// kept, finished or not, and cannot replace a waiting job by a newer one, so a key per device
/// would drop every later change until the retention purge. Jobs without a key, each mirroring
/// whatever the database holds when it runs, leave the hub with the truth whichever runs last.
struct InstallationMirror: Sendable {
    static let kind = "push.installation"

    struct Args: Codable, Equatable {
        let deviceID: String
    }

    /// Off on the direct route: nothing is enqueued, and no worker runs the kind.
    let isOn: Bool

    static let off = InstallationMirror(isOn: false)

    init(isOn: Bool) {
        self.isOn = isOn
    }

    init(route: PushRoute) {
        isOn = route == .notificationHubs
    }

    /// About a day of the runtime's backoff (doubling from a second, then hourly): a job that runs
    /// out dead-letters, and the device's next change, or `bff jobs retry`, mirrors it again.
    static let maxAttempts = 35

    /// Enqueues a mirror of each of `devices` on `connection`, inside the caller's transaction.
    /// Without user: a device may change hands, and a deleted account's devices must still be
    /// removed from the hub after its rows (and jobs tied to it) are gone.
    func enqueue(devices: some Sequence<String>, on connection: PostgresConnection, logger: Logger) async throws {
        guard isOn else { return }
        for device in Set(devices).sorted() {
            try await JobQueue.enqueue(
                Self.kind, Args(deviceID: device), options: .init(maxAttempts: Self.maxAttempts), on: connection, logger: logger)
        }
    }
}
