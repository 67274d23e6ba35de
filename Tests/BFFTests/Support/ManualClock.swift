import NIOConcurrencyHelpers

/// A clock a test moves by hand, for code that measures ages with an injected `now` (the IdP's
/// discovery and key caches): time passes when the test says, not while it sleeps.
final class ManualClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = NIOLockedValueBox(Duration.zero)

    var now: @Sendable () -> ContinuousClock.Instant {
        { [start, offset] in start + offset.withLockedValue { $0 } }
    }

    func advance(by duration: Duration) {
        offset.withLockedValue { $0 += duration }
    }
}
