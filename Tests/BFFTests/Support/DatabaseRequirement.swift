import Testing

extension Trait where Self == ConditionTrait {
    /// For suites and tests that need what `scripts/test` starts: a PostgreSQL cluster (and its
    /// cluster tool), the mock OpenID provider. Without it — a bare `swift test` — they are skipped,
    /// saying why, and the rest run. `scripts/test` sets BFF_TEST_REQUIRE_DATABASE, under which they
    /// are never skipped: a broken PostgreSQL install fails them instead of passing a green run.
    static var needsDatabase: Self {
        .enabled(
            if: TestEnvironment.values["BFF_TEST_DATABASE_URL"] != nil || TestEnvironment.values["BFF_TEST_REQUIRE_DATABASE"] == "1",
            "needs PostgreSQL and the mock IdP that scripts/test starts (BFF_TEST_DATABASE_URL is not set)")
    }
}
