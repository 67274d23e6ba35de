#ifndef BFF_C_RUNTIME_HOOKS_H
#define BFF_C_RUNTIME_HOOKS_H

#include <stdbool.h>

/// The Swift runtime's global-enqueue hook slot (`swift_task_enqueueGlobal_hook`), reached by a
/// link-time reference: with `--static-swift-stdlib` the runtime's symbols are not exported, so
/// `dlsym` cannot find it there.
void *_Nullable *_Nonnull bff_swift_task_enqueue_global_hook_slot(void);

/// Stores `hook` in `slot` if the slot is still empty, atomically; false when something else set it
/// first. Code that sets the slot with a plain store can still race this: the runtime gives no lock.
bool bff_install_hook(void *_Nullable *_Nonnull slot, void *_Nonnull hook);

#endif
