import { LockBackendError } from '../../errors/lock-errors.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from '../lock-backend.js';

/** Options of {@link MemoryLockBackend}. */
export interface MemoryLockBackendOptions {
  /**
   * Clock in milliseconds, `Date.now` by default. It dates lease expiries and
   * computes `retryAfterMs`. A lease ends when its timer fires or when this
   * clock reaches the expiry, whichever comes first, so a test may also move a
   * fake clock forward to expire leases.
   */
  readonly now?: () => number;
}

/** `setTimeout` fires at once (with a warning) for delays above this. */
const MAX_TIMER_DELAY_MS = 2_147_483_647;

/** A timer that may span longer than one `setTimeout` allows. */
interface Countdown {
  handle?: ReturnType<typeof setTimeout>;
}

/** Calls `onFire` after `ms` milliseconds; the timer never keeps the process alive. */
function startCountdown(ms: number, onFire: () => void): Countdown {
  const countdown: Countdown = {};
  const arm = (remaining: number): void => {
    const step = Math.min(remaining, MAX_TIMER_DELAY_MS);
    countdown.handle = setTimeout(() => {
      countdown.handle = undefined;
      if (remaining > step) {
        arm(remaining - step);
      } else {
        onFire();
      }
    }, step);
    countdown.handle.unref();
  };
  arm(ms);
  return countdown;
}

function stopCountdown(countdown: Countdown | undefined): void {
  if (countdown?.handle !== undefined) {
    clearTimeout(countdown.handle);
    countdown.handle = undefined;
  }
}

/** A caller queued for a busy key. */
interface Waiter {
  readonly token: string;
  readonly leaseMs: number;
  readonly resolve: (result: LockGrant | LockBusy) => void;
  readonly signal?: AbortSignal;
  onAbort?: () => void;
  timer?: Countdown;
  settled: boolean;
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
 *   increases across owners, releases and expiries for the backend's lifetime.
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
  private closed = false;

  constructor(options: MemoryLockBackendOptions = {}) {
    this.now = options.now ?? Date.now;
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
      return this.grant(key, token, leaseMs);
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

  async close(): Promise<void> {
    if (this.closed) {
      return;
    }
    this.closed = true;
    for (const state of this.keys.values()) {
      stopCountdown(state.leaseTimer);
      state.leaseTimer = undefined;
      state.owner = undefined;
      for (const waiter of state.queue.splice(0)) {
        this.settle(waiter, { acquired: false });
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
    state.owner = token;
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

  /** Ends a lease the clock says is over, even if its timer has not fired yet. */
  private expireIfDue(key: string): void {
    const state = this.keys.get(key);
    if (state?.owner !== undefined && this.now() >= state.expiresAt) {
      this.free(key, state);
    }
  }

  /** Drops the holder and hands the key to the next waiter, if any. */
  private free(key: string, state: KeyState): void {
    stopCountdown(state.leaseTimer);
    state.leaseTimer = undefined;
    state.owner = undefined;
    const next = state.queue.shift();
    if (next === undefined) {
      this.keys.delete(key);
      return;
    }
    this.settle(next, this.grant(key, next.token, next.leaseMs));
  }

  private enqueue(
    key: string,
    state: KeyState,
    init: Pick<Waiter, 'token' | 'leaseMs' | 'resolve' | 'signal'>,
    waitMs: number,
  ): void {
    const waiter: Waiter = { ...init, settled: false };
    const giveUp = (): void => {
      if (waiter.settled) {
        return;
      }
      const index = state.queue.indexOf(waiter);
      if (index !== -1) {
        state.queue.splice(index, 1);
      }
      this.settle(waiter, this.busy(state));
      if (
        this.keys.get(key) === state &&
        state.owner === undefined &&
        state.queue.length === 0
      ) {
        this.keys.delete(key);
      }
    };
    if (Number.isFinite(waitMs)) {
      waiter.timer = startCountdown(waitMs, giveUp);
    }
    if (waiter.signal !== undefined) {
      waiter.onAbort = giveUp;
      waiter.signal.addEventListener('abort', giveUp, { once: true });
    }
    state.queue.push(waiter);
  }

  /** Resolves a waiter once, dropping its timer and abort listener. */
  private settle(waiter: Waiter, result: LockGrant | LockBusy): void {
    if (waiter.settled) {
      return;
    }
    waiter.settled = true;
    stopCountdown(waiter.timer);
    waiter.timer = undefined;
    if (waiter.onAbort !== undefined) {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.onAbort = undefined;
    }
    waiter.resolve(result);
  }

  private busy(state: KeyState): LockBusy {
    if (state.owner === undefined) {
      return { acquired: false };
    }
    return {
      acquired: false,
      retryAfterMs: Math.max(0, Math.ceil(state.expiresAt - this.now())),
    };
  }
}

function assertLease(leaseMs: number): void {
  if (!(leaseMs > 0 && Number.isFinite(leaseMs))) {
    throw new RangeError(`leaseMs must be a positive number, got ${leaseMs}`);
  }
}
