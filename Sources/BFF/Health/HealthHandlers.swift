import BFFAPI
import PostgresNIO

/// Liveness answers while the process runs; readiness needs one database round trip that also
/// proves the schema is current, bounded so a dead database turns it 503 within seconds.
struct HealthHandlers: Sendable {
    let database: Database
    let latestVersion: Int

    func readiness() async -> Result<Int, APIError> {
        do {
            let version = try await withDeadline(.seconds(2)) { [database] in
                try await database.run { client in
                    let rows = try await client.query("SELECT coalesce(max(version), 0) FROM schema_migrations")
                    for try await version in rows.decode(Int.self) { return version }
                    return 0
                }
            }
            guard version >= latestVersion else {
                return .failure(APIError(
                    .serviceUnavailable, "not_ready",
                    "The database schema is at version \(version); this build needs \(latestVersion)."))
            }
            return .success(version)
        } catch {
            return .failure(.databaseUnavailable)
        }
    }
}
