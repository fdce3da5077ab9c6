import { AsyncLocalStorage } from 'node:async_hooks';
import type { HeldKey } from '../lock-service/held-key.js';
import type { ReadWriteLockHandle } from './read-write-lock-handle.js';
import type { ReadWriteLockMode } from './rwlock-errors.js';

/** A read-write lock held by the current async call chain. */
export interface ReadWriteHold {
  readonly held: HeldKey;
  /** What the store granted: a write hold also serves nested reads. */
  readonly mode: ReadWriteLockMode;
}

interface ReadWriteScope {
  /** By scope key (service instance + store key). */
  readonly holds: ReadonlyMap<string, ReadWriteHold>;
  /** The innermost handle, for {@link currentReadWriteLock}. */
  readonly handle: ReadWriteLockHandle;
}

/**
 * The read-write locks the current async call chain holds, set by
 * `ReadWriteLockHandle.run`. A nested `read()`/`write()` of a lock found
 * here joins it instead of waiting for itself (or is refused: a read hold
 * cannot upgrade). Kept apart from the mutex's scope: a read-write lock and
 * a mutex of one name are different locks.
 */
const readWriteScope = new AsyncLocalStorage<ReadWriteScope>();

/** The chain's hold of the lock with `scopeKey`, if any. */
export function chainHold(scopeKey: string): ReadWriteHold | undefined {
  return readWriteScope.getStore()?.holds.get(scopeKey);
}

/** Runs `fn` with `hold` (of `handle`) added to the chain's read-write holds. */
export function runHolding<T>(
  hold: ReadWriteHold,
  handle: ReadWriteLockHandle,
  fn: () => T,
): T {
  const holds = new Map(readWriteScope.getStore()?.holds);
  holds.set(hold.held.scopeKey, hold);
  return readWriteScope.run({ holds, handle }, fn);
}

/**
 * The innermost read-write lock held by the current async call chain (set
 * by `@ReadLock`, `@WriteLock`, `withRead`, `withWrite` and
 * `ReadWriteLockHandle.run`), for example to read a writer's fencing token
 * or the abort signal inside a decorated method.
 */
export function currentReadWriteLock(): ReadWriteLockHandle | undefined {
  return readWriteScope.getStore()?.handle;
}
