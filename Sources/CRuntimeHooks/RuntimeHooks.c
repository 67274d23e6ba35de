#include "CRuntimeHooks.h"

// Defined by libswift_Concurrency (shared, or linked statically into the binary); its real type is a
// function pointer, which the caller stores through the slot.
extern void *swift_task_enqueueGlobal_hook;

void *_Nullable *_Nonnull bff_swift_task_enqueue_global_hook_slot(void) {
    return &swift_task_enqueueGlobal_hook;
}

bool bff_install_hook(void *_Nullable *_Nonnull slot, void *_Nonnull hook) {
    void *expected = 0;
    return __atomic_compare_exchange_n(slot, &expected, hook, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
