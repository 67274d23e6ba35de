"""Hooks that scripts/test loads into its schemathesis contract run (SCHEMATHESIS_HOOKS)."""

import uuid

import schemathesis
from schemathesis.generation.meta import TestPhase

IDEMPOTENCY_KEY = "Idempotency-Key"


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # The stateful phase chains a create with reads, renames and deletes of what it created, so each
    # create there must be a new intent. Its generated keys repeat keys earlier cases sent (the
    # contract's example, short strings such as "0"), and the server then rightly replays the first
    # answer, a chat that may have been deleted since; the resource-availability check would take that
    # for a create whose chat got lost. Key reuse has its own unit test (ChatsTests, "create: ...").
    meta = case.meta
    if meta is None or meta.phase.name != TestPhase.STATEFUL or not case.headers:
        return
    if IDEMPOTENCY_KEY in case.headers:
        case.headers[IDEMPOTENCY_KEY] = str(uuid.uuid4())
