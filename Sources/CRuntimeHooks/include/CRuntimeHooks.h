#ifndef BFF_C_RUNTIME_HOOKS_H
#define BFF_C_RUNTIME_HOOKS_H

/// The Swift runtime's global-enqueue hook slot (`swift_task_enqueueGlobal_hook`), reached by a
/// link-time reference: with `--static-swift-stdlib` the runtime's symbols are not exported, so
/// `dlsym` cannot find it there.
void *_Nullable *_Nonnull bff_swift_task_enqueue_global_hook_slot(void);

#endif
