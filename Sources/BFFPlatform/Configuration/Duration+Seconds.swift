extension Duration {
    /// The duration in seconds, for SQL intervals, timers and metrics.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    /// Whole nanoseconds, for metrics' timers and NIO's time amounts.
    package var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}
