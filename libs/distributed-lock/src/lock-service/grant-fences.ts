import { LockLostError, LockNotAcquiredError } from '../errors/lock-errors.js';
import type { HeldKey } from './held-key.js';

/**
 * Issues the fencing token of every hold in `taken` that came without one
 * (see `LockOptions.fence`), all at once; holds that have theirs cost
 * nothing. A key this acquisition took and lost before its token came was
 * never the caller's: that rejects with `LockNotAcquiredError`, as a key
 * lost while later keys were awaited does. A key the calling chain held
 * already (`outer`) rejects with `LockLostError`. The caller gives `taken`
 * back on a rejection.
 */
export async function issueMissingFences(
  taken: readonly HeldKey[],
  outer: ReadonlyMap<string, HeldKey> | undefined,
  startedAt: number,
): Promise<void> {
  try {
    await Promise.all(taken.map((held) => held.fence()));
  } catch (error) {
    const lostHere = taken.find(
      (held) => held.lost && outer?.get(held.scopeKey) !== held,
    );
    if (error instanceof LockLostError && lostHere)
      throw new LockNotAcquiredError(lostHere.name, Date.now() - startedAt);
    throw error;
  }
}

/** Whether some hold in `taken` still lacks its fencing token. */
export function missesFence(taken: readonly HeldKey[]): boolean {
  return taken.some((held) => held.fencingToken === undefined);
}
