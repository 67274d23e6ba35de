import BFFPlatform
import Foundation
import Logging
import PostgresNIO

/// The workers' and operators' statements on the `jobs` table (migration 0019).
package struct JobStore: Sendable {
    let database: Database

    package init(database: Database) {
        self.database = database
    }

    /// Where a worker's last full claim of a kind ended, in the queue's order (`run_at`, `id`): the
    /// next claim of a deep queue starts after it (`JobWorker`). `run_at` in microseconds since the
    /// epoch, PostgreSQL's own precision, so that the comparison is exact.
    struct ClaimCursor: Sendable, Equatable {
        let runAtMicros: Int64
        let id: Int64
    }

    /// Claims up to `limit` due jobs of `kind` for `worker`, leased until `lease` from now, with the
    /// cursor the claim ends at. SKIP LOCKED: workers claiming at once each get other rows, and none
    /// waits for another. With `after`, only jobs past it in the queue's order: the index scan starts
    /// there instead of walking the entries that every job claimed before it left behind until vacuum
    /// removes them.
    func claim(kind: String, limit: Int, worker: String, lease: Duration, after: ClaimCursor? = nil) async throws -> (jobs: [Job], cursor: ClaimCursor?) {
        try await database.run { client in
            // A statement without a name is planned with its values, so without a cursor the
            // condition folds away, and with one it bounds the index scan.
            let rows = try await client.query(
                """
                WITH next AS (
                    SELECT id FROM jobs WHERE state = 'available' AND kind = \(kind) AND run_at <= now()
                        AND (NOT \(after != nil) OR (run_at, id) > (timestamptz 'epoch' + \(after?.runAtMicros ?? 0) * interval '1 microsecond', \(after?.id ?? 0)))
                    ORDER BY run_at, id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                )
                UPDATE jobs SET state = 'running', attempt = jobs.attempt + 1, locked_by = \(worker),
                    locked_until = now() + \(lease.seconds) * interval '1 second', attempted_at = now()
                FROM next WHERE jobs.id = next.id
                RETURNING jobs.id, jobs.args::text, jobs.user_id, jobs.attempt, jobs.max_attempts, jobs.run_at,
                    (extract(epoch FROM jobs.run_at) * 1000000)::int8
                """, logger: database.logger)
            var jobs: [Job] = []
            var cursor: ClaimCursor?
            for try await (id, args, userID, attempt, maxAttempts, runAt, runAtMicros) in rows.decode((Int64, String, UUID?, Int32, Int32, Date, Int64).self) {
                jobs.append(Job(id: id, kind: kind, args: Data(args.utf8), userID: userID, attempt: Int(attempt), maxAttempts: Int(maxAttempts), runAt: runAt))
                let position = ClaimCursor(runAtMicros: runAtMicros, id: id)
                if cursor.map({ ($0.runAtMicros, $0.id) < (position.runAtMicros, position.id) }) ?? true { cursor = position }
            }
            return (jobs.sorted { $0.runAt < $1.runAt }, cursor)
        }
    }

    /// Extends the leases of `worker`'s running jobs to `lease` from now.
    func renew(worker: String, lease: Duration) async throws {
        try await database.run { client in
            _ = try await client.query(
                """
                UPDATE jobs SET locked_until = now() + \(lease.seconds) * interval '1 second'
                WHERE state = 'running' AND locked_by = \(worker)
                """, logger: database.logger)
        }
    }

    /// Marks the jobs completed; a job whose lease this worker no longer holds is left alone.
    func complete(ids: [Int64], worker: String) async throws {
        try await database.run { client in
            _ = try await client.query(
                """
                UPDATE jobs SET state = 'completed', finished_at = now(), locked_by = NULL, locked_until = NULL, last_error = NULL
                WHERE id = ANY(\(ids)) AND state = 'running' AND locked_by = \(worker)
                """, logger: database.logger)
        }
    }

    /// Records a failed run: back to `available` at `retryAt`, or dead-lettered after the last attempt
    /// (or at once with `dead`). Returns whether the job is now dead.
    func fail(_ job: Job, worker: String, error: String, retryIn delay: Duration, dead: Bool, counted: Bool = true) async throws -> Bool {
        try await database.run { client in
            let rows = try await client.query(
                """
                UPDATE jobs SET
                    attempt = CASE WHEN \(counted) THEN attempt ELSE greatest(attempt - 1, 0) END,
                    state = CASE WHEN \(dead) OR (\(counted) AND attempt >= max_attempts) THEN 'dead' ELSE 'available' END,
                    finished_at = CASE WHEN \(dead) OR (\(counted) AND attempt >= max_attempts) THEN now() END,
                    run_at = CASE WHEN \(dead) OR (\(counted) AND attempt >= max_attempts) THEN run_at
                                  ELSE now() + \(delay.seconds) * interval '1 second' END,
                    locked_by = NULL, locked_until = NULL, last_error = left(\(error), 2000)
                WHERE id = \(job.id) AND state = 'running' AND locked_by = \(worker)
                RETURNING state = 'dead'
                """, logger: database.logger)
            var isDead = false
            for try await value in rows.decode(Bool.self) { isDead = value }
            return isDead
        }
    }

    /// Gives claimed jobs back without counting the run (a worker stopping before it ran them).
    func release(ids: [Int64], worker: String) async throws {
        guard !ids.isEmpty else { return }
        try await database.run { client in
            _ = try await client.query(
                """
                UPDATE jobs SET state = 'available', attempt = greatest(attempt - 1, 0), locked_by = NULL, locked_until = NULL, run_at = now()
                WHERE id = ANY(\(ids)) AND state = 'running' AND locked_by = \(worker)
                """, logger: database.logger)
        }
    }

    /// Jobs whose worker died (its lease ran out) run again; one that had used its last attempt is
    /// dead-lettered. Returns how many were rescued.
    func rescueExpiredLeases() async throws -> Int {
        try await database.run { client in
            let rows = try await client.query(
                """
                UPDATE jobs SET
                    state = CASE WHEN attempt >= max_attempts THEN 'dead' ELSE 'available' END,
                    finished_at = CASE WHEN attempt >= max_attempts THEN now() END,
                    last_error = 'the worker ' || coalesce(locked_by, '?') || ' stopped holding its lease',
                    locked_by = NULL, locked_until = NULL
                WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND locked_until < now() FOR UPDATE SKIP LOCKED)
                RETURNING id
                """, logger: database.logger)
            var count = 0
            for try await _ in rows { count += 1 }
            return count
        }
    }

    /// The earliest `run_at` of an available job of `kinds`, to sleep no longer than until then.
    func nextRunAt(kinds: [String]) async throws -> Date? {
        try await database.run { client in
            let rows = try await client.query(
                // One index probe per kind: min() over `kind = ANY(…)` read every available job's entry.
                """
                SELECT min(next.run_at) FROM unnest(\(kinds)::text[]) AS k (kind),
                    LATERAL (SELECT run_at FROM jobs WHERE state = 'available' AND kind = k.kind ORDER BY run_at LIMIT 1) AS next
                """, logger: database.logger)
            var next: Date?
            for try await value in rows.decode(Date?.self) { next = value }
            return next
        }
    }

    /// Empties a job's arguments once they have served: a job that carried a personal identifier
    /// (a deleted account's store customer id) keeps no copy of it for its retention.
    package func forgetArguments(of id: Int64) async throws {
        try await database.run { [database] client in
            _ = try await client.query("UPDATE jobs SET args = '{}'::jsonb WHERE id = \(id)", logger: database.logger)
        }
    }

    /// Deletes finished jobs (completed, dead, discarded) older than `age`; returns how many.
    package func purgeFinished(olderThan age: Duration) async throws -> Int {
        try await database.run { client in
            let rows = try await client.query(
                """
                WITH gone AS (
                    DELETE FROM jobs WHERE id IN (
                        SELECT id FROM jobs WHERE finished_at < now() - \(age.seconds) * interval '1 second' LIMIT 10000)
                    RETURNING 1
                )
                SELECT count(*)::int8 FROM gone
                """, logger: database.logger)
            var count: Int64 = 0
            for try await value in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    /// Available and running jobs by kind, for the queue-depth gauge.
    /// Jobs by kind and state; `available` counts only those due, `scheduled` those waiting for a
    /// later time (a recall's due time, a retry's backoff): the queue-growth alert reads only the due.
    package func depth() async throws -> [String: QueueDepth] {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT kind, count(*) FILTER (WHERE state = 'available' AND run_at <= now())::int8,
                       count(*) FILTER (WHERE state = 'available' AND run_at > now())::int8,
                       count(*) FILTER (WHERE state = 'running')::int8, count(*) FILTER (WHERE state = 'dead')::int8
                FROM jobs WHERE state IN ('available', 'running', 'dead') GROUP BY kind
                """, logger: database.logger)
            var depth: [String: QueueDepth] = [:]
            for try await (kind, available, scheduled, running, dead) in rows.decode((String, Int64, Int64, Int64, Int64).self) {
                depth[kind] = QueueDepth(available: Int(available), scheduled: Int(scheduled), running: Int(running), dead: Int(dead))
            }
            return depth
        }
    }

    /// The states of a job, as `state` holds them.
    package static let states = ["available", "running", "completed", "dead", "discarded"]

    /// One job as an operator sees it (`bff jobs list`): without its arguments, which may hold push
    /// tokens.
    package struct Summary: Sendable {
        package let id: Int64
        package let kind: String
        package let state: String
        package let attempt: Int
        package let maxAttempts: Int
        package let runAt: Date
        package let createdAt: Date
        package let finishedAt: Date?
        package let lastError: String?
    }

    /// The newest jobs (at most `limit`), of a state and a kind when given.
    package func list(state: String?, kind: String?, limit: Int) async throws -> [Summary] {
        try await database.run { client in
            let rows = try await client.query(
                """
                SELECT id, kind, state, attempt, max_attempts, run_at, created_at, finished_at, last_error FROM jobs
                WHERE (\(state)::text IS NULL OR state = \(state)) AND (\(kind)::text IS NULL OR kind = \(kind))
                ORDER BY id DESC LIMIT \(limit)
                """, logger: database.logger)
            var jobs: [Summary] = []
            for try await (id, kind, state, attempt, maxAttempts, runAt, createdAt, finishedAt, lastError) in rows.decode(
                (Int64, String, String, Int32, Int32, Date, Date, Date?, String?).self)
            {
                jobs.append(
                    Summary(
                        id: id, kind: kind, state: state, attempt: Int(attempt), maxAttempts: Int(maxAttempts), runAt: runAt,
                        createdAt: createdAt, finishedAt: finishedAt, lastError: lastError))
            }
            return jobs
        }
    }

    /// Puts a dead or discarded job back in the queue with its attempts reset.
    package func retry(id: Int64) async throws {
        try await change(
            id: id, allowed: ["dead", "discarded"],
            """
            UPDATE jobs SET state = 'available', attempt = 0, run_at = now(), finished_at = NULL
            WHERE id = \(id) AND state IN ('dead', 'discarded')
            RETURNING pg_notify(\(JobQueue.channel), kind)::text
            """)
    }

    /// Takes a waiting or dead job out of the queue for good.
    package func discard(id: Int64) async throws {
        try await change(
            id: id, allowed: ["available", "dead"],
            """
            UPDATE jobs SET state = 'discarded', finished_at = now()
            WHERE id = \(id) AND state IN ('available', 'dead')
            RETURNING ''::text
            """)
    }

    /// Runs `change` on job `id`; when it changed nothing, throws why (`ID` is the commands' argument):
    /// there is no such job, or it is in a state other than `allowed`.
    private func change(id: Int64, allowed: [String], _ change: PostgresQuery) async throws {
        try await database.run { client in
            var changed = false
            for try await _ in try await client.query(change, logger: database.logger) { changed = true }
            guard !changed else { return }
            var state: String?
            for try await value in try await client.query("SELECT state FROM jobs WHERE id = \(id)", logger: database.logger).decode(String.self) {
                state = value
            }
            guard let state else { throw ConfigurationError("ID", "no job \(id)") }
            throw ConfigurationError("ID", "job \(id) is \(state); only a job that is \(allowed.joined(separator: " or ")) can be changed so")
        }
    }
}

package struct QueueDepth: Sendable, Equatable {
    var available = 0
    var scheduled = 0
    var running = 0
    var dead = 0
}
