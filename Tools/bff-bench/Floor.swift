import Hummingbird
import Logging

/// The HTTP stack's own floor, for `scripts/bench list` to set the server's 404 beside in the same
/// run: Hummingbird with no middleware and no route, on the same event loops and executor as
/// `bff serve`, so every request is Hummingbird's 404 and nothing else. The difference between the
/// two is what the middleware chain costs; how fast the machine runs that minute cancels out.
func benchFloor(_ options: Options) async throws {
    let port = try options.int("port", default: 54367)
    var logger = Logger(label: "bff-bench-floor")
    logger.logLevel = .warning
    let app = Application(
        router: Router(),
        configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: nil),
        logger: logger)
    try await app.runService()
}
