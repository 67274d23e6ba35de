import Hummingbird
import HummingbirdCore
import HummingbirdTesting
import Logging
import NIOCore
import ServiceLifecycle

extension ApplicationProtocol {
    /// `test(.live)`, except that a server failing to start fails the test with its error.
    /// HummingbirdTesting waits for the server's port without end, and nothing resumes that wait
    /// when start-up throws (the schema check or the first revocation poll timing out on a loaded
    /// machine): once a whole test run sat idle until it was killed. The live test therefore runs
    /// in a task of its own, and whichever ends first, it or start-up's failure, settles the call.
    /// After such a failure that task stays parked on the port for good (its services have
    /// stopped): a failing test leaks it, nothing more. A server that fails later, binding its
    /// port, is not watched; the tests bind port 0.
    /// `setup`: async-http-client over plain HTTP by default: it honours `Connection: close`, which
    /// the server sends with every answer given before the request's body was read (the `.live`
    /// client would send the next request on the closed connection).
    func live<Value: Sendable>(
        _ setup: TestingSetup = .ahc(.http),
        _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        let (outcome, settle) = AsyncThrowingStream.makeStream(of: Value.self)
        let watched = StartupWatched(base: self) { settle.finish(throwing: $0) }
        let running = Task {
            do {
                settle.yield(try await watched.test(setup, test))
                settle.finish()
            } catch {
                settle.finish(throwing: error)
            }
        }
        return try await withTaskCancellationHandler {
            for try await value in outcome { return value }
            throw CancellationError()
        } onCancel: {
            running.cancel()
        }
    }
}

/// The application as it is, but for processes run before the server starts, whose errors are
/// also reported to `failed`.
private struct StartupWatched<Base: ApplicationProtocol>: ApplicationProtocol {
    let base: Base
    let failed: @Sendable (any Error) -> Void

    var responder: Base.Responder {
        get async throws { try await base.responder }
    }
    var server: HTTPServerBuilder { base.server }
    var eventLoopGroup: any EventLoopGroup { base.eventLoopGroup }
    var configuration: ApplicationConfiguration { base.configuration }
    var logger: Logger { base.logger }
    var services: [any Service] { base.services }

    func onServerRunning(_ channel: any Channel) async {
        await base.onServerRunning(channel)
    }

    var processesRunBeforeServerStart: [@Sendable () async throws -> Void] {
        base.processesRunBeforeServerStart.map { process in
            { [failed] in
                do {
                    try await process()
                } catch {
                    failed(error)
                    throw error
                }
            }
        }
    }
}
