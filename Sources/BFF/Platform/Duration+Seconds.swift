extension Duration {
    /// The duration in seconds, for SQL intervals, timers and metrics.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
