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

    /// Devices per statement of `enqueueEveryDevice` unless told otherwise.
    static let backfillBatchSize = 5000

    /// Enqueues a mirror of every device that has a push token, `batchSize` devices per statement
    /// and so per transaction, in the order of their ids (keyset: each batch starts after the last
    /// id of the one before, an index range of `push_tokens_device_key`), so that a million devices
    /// never make one long transaction. The backfill of `bff push mirror-installations`: devices
    /// registered while the route was direct enqueued no mirror. A device that changes meanwhile
    /// enqueues its own, and a second run only tells the hub again what the database holds.
    /// `progress` is told the running total after each batch. Returns how many it enqueued.
    func enqueueEveryDevice(batchSize: Int = InstallationMirror.backfillBatchSize, database: Database, progress: @Sendable (Int) -> Void = { _ in }) async throws -> Int {
        guard isOn else { return 0 }
        precondition(batchSize > 0, "a batch of at least one device")
        // Below every device id (8-128 characters, a CHECK of push_tokens) in any collation.
        var after = ""
        var total = 0
        while true {
            let batch = try await enqueueBatch(after: after, limit: batchSize, database: database)
            total += batch.queued
            if batch.devices > 0 { progress(total) }
            guard batch.devices == batchSize, let last = batch.last else { return total }
            after = last
        }
    }

    /// One batch in one statement: the next `limit` devices after `after`, their jobs queued through
    /// the runtime's one way in, with the arguments `enqueue` writes (`Args` encoded by JSONEncoder
    /// is `{"deviceID": …}`), no user, no unique key, due now; answers how many devices it read, how
    /// many jobs it queued (the same: no key makes one a no-op) and the last id.
    private func enqueueBatch(after: String, limit: Int, database: Database) async throws -> (devices: Int, queued: Int, last: String?) {
        try await database.run { client in
            let rows = try await client.query(
                """
                WITH batch AS (
                    SELECT device_id FROM push_tokens WHERE device_id > \(after) ORDER BY device_id LIMIT \(limit)
                )
                SELECT count(*)::int,
                       coalesce(bff_enqueue_jobs(
                           \(Self.kind), array_agg(jsonb_build_object('deviceID', device_id) ORDER BY device_id),
                           array_agg(NULL::uuid), array_agg(NULL::text), array_agg(NULL::timestamptz),
                           \(Self.maxAttempts)::integer, \(JobQueue.channel)), 0)::int,
                       max(device_id)
                FROM batch
                """, logger: database.logger)
            for try await (devices, queued, last) in rows.decode((Int, Int, String?).self) { return (devices: devices, queued: queued, last: last) }
            throw DatabaseUnavailable(reason: "the installations' backfill returned no row")
        }
    }
}
