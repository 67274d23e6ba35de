import ArgumentParser

/// `AsyncParsableCommand.main()` without `@main`, which cannot be used here: the executor must be
/// installed first. Inside an async function the async overloads of `main` and `run` are chosen.
func runCommand() async {
    await BFFCommand.main(nil)
}

// Swift tasks then run on the same event loops as the HTTP server and the PostgreSQL
// connections: a request no longer hops between NIO's threads and Dispatch's pool at every
// await, which on two cores cost more than the work itself.
_ = EventLoopGlobalExecutor.install()
await runCommand()
