import Hummingbird

/// Runs every later step and the handler of an operation whose answer streams (the policy's
/// `streams`: the tutoring turn, the export) in a child task, which ends when the answer's head is
/// ready; the connection's task then only writes the body.
///
/// Why: Swift's task allocator keeps the memory slabs a task's deepest call needed until the task
/// ends (it reuses them, it never frees them). A connection's task lives as long as the connection,
/// so a turn streaming for a minute held the frames of seventeen steps, the generated handler and
/// the turn's preparation all that time: about 50 KiB a stream, most of the 187 MiB `scripts/bench
/// chat` measured with 1,000 streams open (heaptrack: 76 MiB of task slabs at the peak). Requests
/// that answer at once keep running in the connection's task: a child task costs each one
/// allocations for nothing.
struct StreamedAnswerTaskMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.operation?.policy.streams == true else { return try await next(request, context) }
        return try await withoutActuallyEscaping(next) { next in
            // The child runs `next` while this task waits for it and nothing else calls it.
            let handler = UncheckedSendableHandler(next: next)
            return try await withThrowingTaskGroup(of: Response.self) { group in
                group.addTask { try await handler.next(request, context) }
                guard let response = try await group.next() else { throw CancellationError() }
                return response
            }
        }
    }
}

private struct UncheckedSendableHandler: @unchecked Sendable {
    let next: (Request, AppRequestContext) async throws -> Response
}
