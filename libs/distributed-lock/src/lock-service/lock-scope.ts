import { AsyncLocalStorage } from 'node:async_hooks';
import type { HeldKey } from './held-key.js';
import type { LockHandle } from './lock-handle.js';

/**
 * What the current async call chain holds. A nested acquisition of a key found
 * here is reentrant: it joins the outer hold instead of waiting for itself.
 * Keys are scoped per LockService instance, so two apps in one process never
 * mistake each other's locks for their own.
 */
export interface LockScope {
  readonly held: ReadonlyMap<string, HeldKey>;
  readonly handle: LockHandle;
}

export const lockScope = new AsyncLocalStorage<LockScope>();

/**
 * Whether this Node keeps an `AsyncLocalStorage`'s store with async hooks
 * (Node 20 and 22 do; Node 24 keeps it in the async context frame, at no
 * cost per promise). Read from an internal method: should it be renamed,
 * the storage simply stays enabled, as before.
 */
const storedByHooks =
  typeof Reflect.get(lockScope, '_propagate') === 'function';

// Scopes whose lock has not started its release yet.
let openScopes = 0;

/**
 * Counts a lock's scope as open until the returned function is called (once,
 * when the lock's release starts). When the last open scope closes, the
 * storage is disabled: while it is enabled, Node calls its hook for every
 * promise the process creates, a lock scope's or not, which cost a
 * sequential decorated lock cycle about a tenth of its throughput. The
 * next `run` enables it again. Every chain that runs in a scope runs while
 * the scope is open, so the store still reaches everything it created;
 * what a scope left running after its release no longer sees the released
 * lock, which it could not use anyway.
 */
export function openScope(): () => void {
  if (!storedByHooks) return () => undefined;
  openScopes += 1;
  let closed = false;
  return () => {
    if (closed) return;
    closed = true;
    openScopes -= 1;
    if (openScopes === 0) lockScope.disable();
  };
}

/**
 * The innermost lock held by the current async call chain (set by
 * `@DistributedLock`, `LockService.using` and `LockHandle.run`), for example to
 * read its fencing token or abort signal inside a decorated method. Once
 * that lock's release has started, code its chain left running sees the
 * lock outside it (or none).
 */
export function currentLock(): LockHandle | undefined {
  return lockScope.getStore()?.handle;
}
