import BFFAPI
import BFFPlatform
import PostgresNIO

/// Liveness answers while the process runs; readiness needs a database round trip through each
/// pool that also proves the schema is current, bounded so a dead database turns it 503 within
/// seconds.
struct HealthHandlers: Sendable {
    let database: Database
    /// Every migration this build has, each of which must be applied.
    let versions: [Int]

    init(database: Database, versions: [Int]) {
        self.database = database
        self.versions = versions
    }

    init(_ base: BaseServices) {
        self.init(database: base.database, versions: base.migrator.migrations.map(\.version))
    }

    /// Also sets `bff_ready`, which the alerts watch.
    func readiness() async -> Result<Int, APIError> {
        let result = await check()
        Observability.recordReadiness((try? result.get()) != nil)
        return result
    }

    private func check() async -> Result<Int, APIError> {
        do {
            // Through every pool: a request may use any of them, and after an outage each reconnects
            // on its own schedule.
            let (version, applied) = try await withDeadline(.seconds(2)) { [database, versions] in
                var found = (0, 0)
                for pool in database.clients.indices {
                    found = try await database.run(pool: pool) { client in
                        let rows = try await client.query(
                            """
                            SELECT coalesce(max(version), 0), count(*) FILTER (WHERE version = ANY(\(versions)))::int FROM schema_migrations
                            """)
                        for try await row in rows.decode((Int, Int).self) { return row }
                        return (0, 0)
                    }
                }
                return found
            }
            // Every version of this build applied, the newest included.
            guard applied == versions.count else {
                return .failure(APIError(.notReady, .schemaBehind(version: version, missing: versions.count - applied)))
            }
            return .success(version)
        } catch {
            return .failure(.databaseUnavailable)
        }
    }
}
