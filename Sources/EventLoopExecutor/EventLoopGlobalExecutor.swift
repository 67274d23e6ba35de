import CRuntimeHooks
import NIOCore
import NIOPosix

/// Runs the jobs of Swift's global executor on NIO's singleton event loops, as the generic executor.
///
/// NIO's own takeover (`unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`)
/// runs each job with the event loop as its *serial* executor. A nonisolated async function must run
/// on the generic executor, so every call into one then parked the task and queued it on the loop
/// again: ~85 queued jobs per chat-list request, a fifth of the server's CPU. Run as the generic
/// executor, as Swift's default pool runs them, those calls continue in place (~2.5 jobs per request).
public enum EventLoopGlobalExecutor {
    typealias EnqueueHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// The runtime's generic executor, `SerialExecutorRef::generic()`: two null words. No public API
    /// names it; Swift's default global executor runs its jobs on it.
    private static let generic: UnownedSerialExecutor = {
        precondition(MemoryLayout<UnownedSerialExecutor>.size == 2 * MemoryLayout<UInt>.size)
        return unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
    }()

    private static func enqueue(_ job: UnownedJob) {
        let executor = generic
        // `any()` is the current loop when called on one, so a task resumes on the loop that woke it.
        MultiThreadedEventLoopGroup.singleton.any().execute { job.runSynchronously(on: executor) }
    }

    /// Sets how many event loops NIO's singleton group will have (`BFF_EVENT_LOOPS`); only before
    /// anything has used the group, which `install` does not.
    public static func setEventLoopCount(_ count: Int) {
        NIOSingletons.groupLoopCountSuggestion = count
    }

    /// Installs the runtime's global-enqueue hook; false (and Swift's default pool stays) when
    /// something else has set it, or when this compiler's runtime was not checked against it. Must run
    /// on the main thread before anything starts a task.
    public static func install() -> Bool {
        // The hook's signature and the generic executor's layout are the runtime's internals, checked
        // up to Swift 6.3 (as NIO bounds its own takeover by compiler version); a newer toolchain keeps
        // Swift's default pool until someone has checked them again.
        #if compiler(>=6.0) && compiler(<6.4)
        return install(into: bff_swift_task_enqueue_global_hook_slot())
        #else
        return false
        #endif
    }

    /// Installs the hook into `slot` with an atomic compare-and-exchange, so that of two installers
    /// (another library's takeover, say) exactly one wins.
    static func install(into slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> Bool {
        _ = generic
        return withUnsafeTemporaryAllocation(of: EnqueueHook.self, capacity: 1) { hook in
            hook.baseAddress!.initialize(to: { job, _ in EventLoopGlobalExecutor.enqueue(job) })
            // A thin function value is its code address, which is what the hook slot holds.
            return hook.baseAddress!.withMemoryRebound(to: UnsafeMutableRawPointer.self, capacity: 1) { function in
                bff_install_hook(slot, function.pointee)
            }
        }
    }
}
