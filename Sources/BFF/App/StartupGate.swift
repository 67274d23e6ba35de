/// A one-way gate: `wait()` returns once `open()` was called, or when the waiting task is cancelled.
final class StartupGate: Sendable {
    private let (opened, opener) = AsyncStream.makeStream(of: Void.self)

    func open() { opener.finish() }

    /// For one waiter.
    func wait() async {
        for await _ in opened {}
    }
}
