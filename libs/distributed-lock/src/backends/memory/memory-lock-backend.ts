import { LockBackendError } from '../../errors/lock-errors.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
  SessionStore,
} from '../lock-backend.js';
import { startCountdown, stopCountdown, type Countdown } from './countdown.js';
import type { LockBackendHealth } from '../backend-health.js';
import { probeMemory } from './memory-health.js';
import { MemorySessions } from './memory-sessions.js';
import {
  enqueueWaiter,
  settleWaiter,
  type Waiter,
  type WaiterInit,
} from './memory-waiters.js';

/**
 * Options of {@link MemoryLockBackend}.
 *
 * @inline
 */
export interface MemoryLockBackendOptions {
  /**
   * Clock in milliseconds, `Date.now` by default. It dates lease expiries and
   * computes `retryAfterMs`. A lease ends when its timer fires or when this
   * clock reaches the expiry, whichever comes first, so a test may also move a
   * fake clock forward to expire leases.
   */
  readonly now?: () => number;
}

/** What the backend knows about a key that is held or waited for. */
interface KeyState {
  /** Token of the holder; undefined while the key is free. */
  owner?: string;
  /** When the holder's lease ends, on the configured clock. */
  expiresAt: number;
  /** Frees the key (and hands it on) when the lease ends. */
  leaseTimer?: Countdown;
  /** Waiters in arrival order; only live (unsettled) ones. */
  readonly queue: Waiter[];
}

/**
 * An in-memory {@link LockBackend}, **for a single process only**: meant for
 * unit tests and local development without Redis. Locks live in this object,
 * so two processes (or two backend instances) never exclude each other; never
 * use it to guard anything shared between processes in production.
 *
 * It has the same semantics as the Redis backend:
 * - **owner-only release and extend**: only the token that holds a key may
 *   release it or extend its lease;
 * - **leases**: a key not released in time is freed when its lease ends;
 * - **FIFO hand-off**: callers waiting for a busy key are queued in arrival
 *   order, a newcomer never overtakes them, and on release or lease expiry the
 *   key passes straight to the next waiter (with its own lease), waking only
 *   that one;
 * - **fencing**: every grant carries a per-key fencing token that strictly
 *   increases across owners, releases and expiries for the backend's lifetime
 *   (so `AcquireRequest.fence` costs nothing here);
 * - **process sessions** ({@link sessions}): a key held under a token bound to
 *   a session (`<session id>.<random>`) is free once that session lapsed or
 *   ended, whatever its lease: it passes to the next waiter at that moment,
 *   and the dead holder can no longer extend, fence or release it.
 *
 * Every method resolves asynchronously, as a network store would. Timers are
 * unref'd and an idle backend holds none; {@link close} settles all waiters as
 * busy, after which every call rejects with `LockBackendError`.
 */
export class MemoryLockBackend implements LockBackend {
  private readonly now: () => number;
  private readonly keys = new Map<string, KeyState>();
  /** Last fencing token granted per key; outlives the keys' states. */
  private readonly fences = new Map<string, number>();
  private readonly sessionRecords: MemorySessions;
  private closed = false;

  /**
   * Process sessions, timed on the monotonic clock (not the `now` option).
   * A session-bound key's lease is a day: its session frees it.
   */
  readonly sessions: SessionStore;

  constructor(options: MemoryLockBackendOptions = {}) {
    this.now = options.now ?? Date.now;
    this.sessionRecords = new MemorySessions(
      () => this.assertOpen(),
      (keys) => {
        for (const key of keys) {
          this.expireIfDue(key);
        }
      },
    );
    this.sessions = this.sessionRecords;
  }

  async acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    this.assertOpen();
    const { key, token, leaseMs, waitMs, signal } = request;
    assertLease(leaseMs);
    if (!(waitMs >= 0)) {
      throw new RangeError(`waitMs must be 0 or more, got ${waitMs}`);
    }

    this.expireIfDue(key);
    const state = this.keys.get(key);
    if (
      state === undefined ||
      (state.owner === undefined && state.queue.length === 0)
    ) {
      const granted = this.grant(key, token, leaseMs);
      // A holder whose session is gone already holds it for no time.
      this.expireIfDue(key);
      return granted;
    }
    if (waitMs === 0 || signal?.aborted) {
      return this.busy(state);
    }
    return new Promise<LockGrant | LockBusy>((resolve) => {
      this.enqueue(key, state, { token, leaseMs, resolve, signal }, waitMs);
    });
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.assertOpen();
    assertLease(leaseMs);
    this.expireIfDue(key);
    const state = this.keys.get(key);
    if (state === undefined || state.owner !== token) {
      return false;
    }
    this.startLease(key, state, leaseMs);
    return true;
  }

  async release(key: string, token: string): Promise<boolean> {
    this.assertOpen();
    this.expireIfDue(key);
    const state = this.keys.get(key);
    if (state === undefined || state.owner !== token) {
      return false;
    }
    this.free(key, state);
    return true;
  }

  /** Grants here carry their fencing token, so this only repeats the holder's. */
  async fence(key: string, token: string): Promise<number | undefined> {
    this.assertOpen();
    this.expireIfDue(key);
    const state = this.keys.get(key);
    if (state === undefined || state.owner !== token) {
      return undefined;
    }
    return this.fences.get(key);
  }

  async isLocked(key: string): Promise<boolean> {
    this.assertOpen();
    this.expireIfDue(key);
    return this.keys.get(key)?.owner !== undefined;
  }

  /** See {@link LockBackend.probe}: up until closed. */
  probe(): Promise<LockBackendHealth> {
    return probeMemory(this.closed);
  }

  async close(): Promise<void> {
    if (this.closed) {
      return;
    }
    this.closed = true;
    this.sessionRecords.close();
    for (const state of this.keys.values()) {
      stopCountdown(state.leaseTimer);
      state.leaseTimer = undefined;
      state.owner = undefined;
      for (const waiter of state.queue.splice(0)) {
        settleWaiter(waiter, { acquired: false });
      }
    }
    this.keys.clear();
    this.fences.clear();
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new LockBackendError('backend closed');
    }
  }

  /** Makes `token` the holder of `key` with a fresh lease and fencing token. */
  private grant(key: string, token: string, leaseMs: number): LockGrant {
    let state = this.keys.get(key);
    if (state === undefined) {
      state = { expiresAt: 0, queue: [] };
      this.keys.set(key, state);
    }
    const fencingToken = (this.fences.get(key) ?? 0) + 1;
    this.fences.set(key, fencingToken);
    this.setOwner(key, state, token);
    this.startLease(key, state, leaseMs);
    return { acquired: true, fencingToken, leaseMs };
  }

  private startLease(key: string, state: KeyState, leaseMs: number): void {
    stopCountdown(state.leaseTimer);
    state.expiresAt = this.now() + leaseMs;
    state.leaseTimer = startCountdown(leaseMs, () => {
      state.leaseTimer = undefined;
      if (this.keys.get(key) === state && state.owner !== undefined) {
        this.free(key, state);
      }
    });
  }

  /**
   * Frees a key whose lease the clock says is over, even if its timer has not
   * fired yet, or whose holder's session is gone.
   */
  private expireIfDue(key: string): void {
    const state = this.keys.get(key);
    if (
      state?.owner !== undefined &&
      (this.now() >= state.expiresAt ||
        !this.sessionRecords.isHolderLive(state.owner))
    ) {
      this.free(key, state);
    }
  }

  /** Drops the holder and hands the key to the next waiter, if any. */
  private free(key: string, state: KeyState): void {
    this.dropOwner(key, state);
    for (let next = state.queue.shift(); next; next = state.queue.shift()) {
      settleWaiter(next, {
        ...this.grant(key, next.token, next.leaseMs),
        handoff: 'remote',
      });
      if (this.sessionRecords.isHolderLive(next.token)) {
        return;
      }
      // Its session went while it waited: as if it lapsed just after the grant.
      this.dropOwner(key, state);
    }
    this.keys.delete(key);
  }

  private dropOwner(key: string, state: KeyState): void {
    stopCountdown(state.leaseTimer);
    state.leaseTimer = undefined;
    this.setOwner(key, state, undefined);
  }

  /** Sets the holder of `key`, telling the sessions which keys each one holds. */
  private setOwner(key: string, state: KeyState, owner?: string): void {
    if (state.owner !== undefined) {
      this.sessionRecords.unbind(key, state.owner);
    }
    state.owner = owner;
    if (owner !== undefined) {
      this.sessionRecords.bind(key, owner);
    }
  }

  /** Queues a caller; one that gives up leaves a key nobody holds or waits for. */
  private enqueue(
    key: string,
    state: KeyState,
    init: WaiterInit,
    waitMs: number,
  ): void {
    enqueueWaiter(state.queue, init, waitMs, () => {
      const busy = this.busy(state);
      if (
        this.keys.get(key) === state &&
        state.owner === undefined &&
        state.queue.length === 0
      ) {
        this.keys.delete(key);
      }
      return busy;
    });
  }

  private busy(state: KeyState): LockBusy {
    if (state.owner === undefined) {
      return { acquired: false };
    }
    const left = Math.min(
      state.expiresAt - this.now(),
      this.sessionRecords.holderRemainingMs(state.owner),
    );
    return { acquired: false, retryAfterMs: Math.max(0, Math.ceil(left)) };
  }
}

function assertLease(leaseMs: number): void {
  if (!(leaseMs > 0 && Number.isFinite(leaseMs))) {
    throw new RangeError(`leaseMs must be a positive number, got ${leaseMs}`);
  }
}
