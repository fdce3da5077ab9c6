import { monotonicNow } from '../../lease/lease-clock.js';

/**
 * A lock this process holds under contention, which its holder may pass to
 * another waiter of this process (see `RedisLockBackend.release`).
 */
export interface LocalHold {
  /** The token the lock is stored under in Redis: that of its first holder here. */
  readonly storedAs: string;
  /** The token of whoever holds it now; '' while it is being passed on. */
  holder: string;
  /** Local estimate of when the lease ends (monotonic ms), never later than Redis's. */
  expiresAt: number;
  /** Times in a row the queue's head was passed over so far, here and by release.lua. */
  passes: number;
  /** When the first of those passes was (monotonic ms). */
  firstPassAt: number;
  /** Of {@link passes}, those made in memory, which Redis has not counted yet. */
  passesInMemory: number;
}

/** Passes over the queue's head that a lock handed over by release.lua brings along. */
export interface PassStreak {
  readonly passes: number;
  readonly sinceFirstMs: number;
}

/**
 * A hold whose lease ended this long ago by the local estimate is surely gone
 * from Redis too (the estimate errs early by a round trip).
 */
const staleHoldMs = 60_000;

/** The contended locks this process holds, by key. */
export class LocalHolds extends Map<string, LocalHold> {
  /** Sweep stale holds when there are this many. */
  private sweepAt = 256;

  /** The hold of `key` that `token` has or had here, if any. */
  of(key: string, token: string): LocalHold | undefined {
    if (this.size === 0) return undefined;
    const hold = this.get(key);
    return hold && (hold.holder === token || hold.storedAs === token)
      ? hold
      : undefined;
  }

  /** Forgets `hold` if it is still the hold of `key` (a newer one stays). */
  forget(key: string, hold: LocalHold): void {
    if (this.get(key) === hold) this.delete(key);
  }

  /** Records that `token` holds `key` until `expiresAt` (monotonic ms), stored under that token. */
  record(
    key: string,
    token: string,
    expiresAt: number,
    streak?: PassStreak,
  ): void {
    const now = monotonicNow();
    this.set(key, {
      storedAs: token,
      holder: token,
      expiresAt,
      passes: streak?.passes ?? 0,
      firstPassAt: now - (streak?.sinceFirstMs ?? 0),
      passesInMemory: 0,
    });
    if (this.size < this.sweepAt) return;
    // A holder whose lease ran out without a release leaves its hold behind.
    for (const [heldKey, hold] of this) {
      if (hold.expiresAt < now - staleHoldMs) this.delete(heldKey);
    }
    this.sweepAt = Math.max(256, this.size * 2);
  }
}
