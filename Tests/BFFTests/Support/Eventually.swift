/// Polls `condition` every `interval` for up to `limit`: tests wait for conditions, never for fixed times.
func eventually(
    within limit: Duration = .seconds(30), every interval: Duration = .milliseconds(20), _ condition: @Sendable () async throws -> Bool
) async throws -> Bool {
    let start = ContinuousClock.now
    while ContinuousClock.now - start < limit {
        if try await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try await condition()
}
