import ArgumentParser
import BFF
import BFFPlatform
import EventLoopExecutor
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `AsyncParsableCommand.main()` without `@main`, which cannot be used here: the executor must be
/// installed first. Inside an async function the async overloads of `main` and `run` are chosen.
func runCommand() async {
    await BFFCommand.main(nil)
}

// A log reader that goes away (a closed pipe) must not end the server: its lines are dropped.
signal(SIGPIPE, SIG_IGN)

// Before anything starts NIO's loops: their count is fixed when the singleton group is made.
do {
    if let loops = try ProcessConfiguration.eventLoops(environment: ProcessInfo.processInfo.environment) {
        EventLoopGlobalExecutor.setEventLoopCount(loops)
    }
} catch {
    FileHandle.standardError.write(Data("bff: \(error)\n".utf8))
    exit(2)
}

// Swift tasks then run on the same event loops as the HTTP server and the PostgreSQL
// connections: a request no longer hops between NIO's threads and Dispatch's pool at every
// await, which on two cores cost more than the work itself.
_ = EventLoopGlobalExecutor.install()
await runCommand()
