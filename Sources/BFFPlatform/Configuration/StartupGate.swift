/// A one-way gate: `wait()` returns once `open()` was called, or when the waiting task is cancelled.
package final class StartupGate: Sendable {
    private let (opened, opener) = AsyncStream.makeStream(of: Void.self)

    package init() {}

    package func open() { opener.finish() }

    /// For one waiter.
    package func wait() async {
        for await _ in opened {}
    }
}
