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
 * The innermost lock held by the current async call chain (set by
 * `@DistributedLock`, `LockService.using` and `LockHandle.run`), for example to
 * read its fencing token or abort signal inside a decorated method.
 */
export function currentLock(): LockHandle | undefined {
  return lockScope.getStore()?.handle;
}
