import type { LockBusy, LockGrant } from '../lock-backend.js';
import { TimedMemory } from '../timed-memory.js';
import type { Waiter } from './waiter.js';

/** A hand-off message for a waiter that already took the lock is ignored for this long. */
const claimedMemoryMs = 60_000;

/**
 * The acquisitions of one backend that wait, or are about to: by id and by
 * key, and the bookkeeping that matches hand-off messages to them.
 */
export class WaiterRegistry {
  private readonly byId = new Map<string, Waiter>();
  private readonly byKey = new Map<string, Set<Waiter>>();
  /** Ids whose acquire.lua (first or again) is on its way. */
  readonly acquiring = new Set<string>();
  /** Hand-offs that came while their acquisition was on its way: fencing token by id. */
  readonly earlyHandoffs = new Map<string, number>();
  /** Waiters that took a lock whose hand-off message may still come, until when (ms since epoch). */
  readonly claimed = new TimedMemory(claimedMemoryMs);

  /** @param onKeyIdle called when the last waiter for a key leaves. */
  constructor(private readonly onKeyIdle: (key: string) => void) {}

  /** How many acquisitions wait. */
  get size(): number {
    return this.byId.size;
  }

  /** How many keys anyone waits for. */
  get keyCount(): number {
    return this.byKey.size;
  }

  get(id: string): Waiter | undefined {
    return this.byId.get(id);
  }

  /** Whether `waiter` still waits (it has not settled, and no later acquisition took its id). */
  has(waiter: Waiter): boolean {
    return this.byId.get(waiter.id) === waiter;
  }

  hasKey(key: string): boolean {
    return this.byKey.has(key);
  }

  /** The waiters for `key`, oldest first. */
  forKey(key: string): Iterable<Waiter> {
    return this.byKey.get(key) ?? [];
  }

  values(): Iterable<Waiter> {
    return this.byId.values();
  }

  add(waiter: Waiter): void {
    this.byId.set(waiter.id, waiter);
    let sameKey = this.byKey.get(waiter.key);
    if (!sameKey) this.byKey.set(waiter.key, (sameKey = new Set()));
    sameKey.add(waiter);
  }

  /**
   * Ends `waiter`'s wait with `result`. Returns false, and does nothing, when
   * it had ended already.
   */
  settle(waiter: Waiter, result: LockGrant | LockBusy | Error): boolean {
    if (!this.has(waiter)) return false;
    this.byId.delete(waiter.id);
    waiter.outcome =
      !(result instanceof Error) && result.acquired
        ? 'acquired'
        : 'not-acquired';
    clearTimeout(waiter.timer);
    waiter.signal?.removeEventListener('abort', waiter.onAbort);
    const sameKey = this.byKey.get(waiter.key);
    sameKey?.delete(waiter);
    if (sameKey?.size === 0) {
      this.byKey.delete(waiter.key);
      this.onKeyIdle(waiter.key);
    }
    if (result instanceof Error) waiter.reject(result);
    else waiter.resolve(result);
    return true;
  }

  /** The longest-waiting waiter for `key` that can take a lock now (`now`: ms since epoch). */
  oldestLocal(key: string, now: number, only?: 'unqueued'): Waiter | undefined {
    for (const waiter of this.forKey(key)) {
      if (
        (only === undefined || waiter.entry === undefined) &&
        !waiter.cancelling &&
        !waiter.confirming &&
        waiter.deadline >= now &&
        !waiter.signal?.aborted &&
        // Being queued again (see QueueChecks.requeue): its new entry is not known yet.
        !this.acquiring.has(waiter.id)
      )
        return waiter;
    }
    return undefined;
  }

  /** Those who wait for `key` behind a lock this process holds, and not in Redis's queue. */
  behind(key: string): Waiter[] {
    return [...this.forKey(key)].filter((waiter) => waiter.entry === undefined);
  }

  /** Takes the hand-off that came early for `id`, if one did. */
  takeEarlyHandoff(id: string): number | undefined {
    if (this.earlyHandoffs.size === 0) return undefined;
    const fencingToken = this.earlyHandoffs.get(id);
    if (fencingToken !== undefined) this.earlyHandoffs.delete(id);
    return fencingToken;
  }
}
