import { LockBackendError, LockLostError } from '../errors/lock-errors.js';
import type { LockBackend } from '../backends/lock-backend.js';
import type { LockLostReason } from './lock-events.js';

/** How a hold keeps its lease. */
export interface LeasePolicy {
  /** Lease length in ms. */
  readonly leaseMs: number;
  /** True: renew every leaseMs/3 until released (no explicit `leaseTime`). */
  readonly watchdog: boolean;
}

export interface HeldKeyInit {
  readonly name: string;
  /** Identifies this hold in the async-call-chain scope: owning service + store key. */
  readonly scopeKey: string;
  readonly storeKey: string;
  readonly token: string;
  /** When the backend issued one with the grant. */
  readonly fencingToken?: number;
  readonly policy: LeasePolicy;
  /** Lease the backend actually set; may be shorter than the policy's. */
  readonly grantedLeaseMs: number;
  /** When the acquisition was sent, so the local expiry errs early, never late. */
  readonly sentAt: number;
  readonly backend: LockBackend;
  readonly onLost: (held: HeldKey, reason: LockLostReason) => void;
}

/**
 * One lock key held by this process, shared by every reentrant hold of it in
 * the same call chain. It keeps the lease alive (watchdog) or watches it end
 * (explicit lease), and aborts {@link signal} the moment the lock is known lost.
 */
export class HeldKey {
  readonly name: string;
  readonly scopeKey: string;
  readonly storeKey: string;
  readonly token: string;
  /** Issued with the grant or by {@link fence}; undefined until then. */
  fencingToken?: number;
  readonly policy: LeasePolicy;
  /** Local estimate of when the lease ends (ms since epoch). */
  expiresAt: number;
  /** Reentrant holds not yet released. */
  holds = 1;
  /** Created on first use of {@link signal}: most holds never look at it. */
  private controller?: AbortController;
  private lostWith?: LockLostError;
  /** A fence request under way, shared by concurrent callers. */
  private fencing?: Promise<number>;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly backend: LockBackend;
  private readonly onLost: HeldKeyInit['onLost'];

  constructor(init: HeldKeyInit) {
    this.name = init.name;
    this.scopeKey = init.scopeKey;
    this.storeKey = init.storeKey;
    this.token = init.token;
    this.fencingToken = init.fencingToken;
    this.policy = init.policy;
    this.backend = init.backend;
    this.onLost = init.onLost;
    this.expiresAt = init.sentAt + init.grantedLeaseMs;
    const left = this.expiresAt - Date.now();
    if (init.grantedLeaseMs < init.policy.leaseMs) {
      // Handed over from the queue with a short lease: top it up to the full
      // lease at a third of what may be left of it. A short hold has released
      // by then and never pays the extra round trip; a hand-off that arrived
      // late (little left by the estimate) is confirmed at once.
      this.scheduleRenewal(Math.max(0, left / 3));
    } else if (left < (init.policy.leaseMs * 2) / 3) {
      // Granted so long after asking that the lease, begun at some unknown
      // moment since, may be mostly gone by the local estimate: set the full
      // lease now, which also confirms that the lock is still ours.
      this.scheduleRenewal(0);
    } else if (init.policy.watchdog) {
      this.scheduleRenewal(init.policy.leaseMs / 3);
    } else {
      this.scheduleExpiryNotice();
    }
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostWith) this.controller.abort(this.lostWith);
    }
    return this.controller.signal;
  }

  get lost(): boolean {
    return this.lostWith !== undefined;
  }

  /**
   * This hold's fencing token, issued by the store on first use unless the
   * grant brought one. Rejects with `LockLostError` when the lock is no longer
   * ours: a holder whose lease ran out never gets a token.
   */
  fence(): Promise<number> {
    if (this.fencingToken !== undefined)
      return Promise.resolve(this.fencingToken);
    this.fencing ??= this.issueFence().finally(() => {
      this.fencing = undefined;
    });
    return this.fencing;
  }

  private async issueFence(): Promise<number> {
    if (this.lostWith) throw this.lostWith;
    if (this.holds <= 0 || this.stopped) {
      throw new LockLostError(
        this.name,
        `Lock "${this.name}" is no longer held: a fencing token is issued only to its holder`,
      );
    }
    const fence = await this.backend.fence(this.storeKey, this.token);
    if (fence === undefined) {
      this.markLost('taken-over');
      throw this.lostWith;
    }
    this.fencingToken = fence;
    return fence;
  }

  /** Sets the remaining lease to `leaseMs`; false (and lost) when the lock is no longer ours. */
  async extend(leaseMs: number): Promise<boolean> {
    if (this.lost || this.stopped) return false;
    const sentAt = Date.now();
    const owned = await this.backend.extend(this.storeKey, this.token, leaseMs);
    if (!owned) {
      this.markLost('taken-over');
      return false;
    }
    this.expiresAt = sentAt + leaseMs;
    if (!this.policy.watchdog) {
      clearTimeout(this.timer);
      this.scheduleExpiryNotice();
    }
    return true;
  }

  /** Frees the key in the store. False when it had been lost already. */
  release(): Promise<boolean> {
    this.stop();
    const wasLost = this.lost;
    let pending: Promise<boolean>;
    try {
      pending = this.backend.release(this.storeKey, this.token);
    } catch (error) {
      // A backend that throws instead of rejecting still fails as a rejection.
      return Promise.reject(error as Error);
    }
    return pending.then((released) => {
      if (!released && !wasLost) this.markLost('taken-over');
      return released && !wasLost;
    });
  }

  /** Stops renewing (release, shutdown). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private scheduleRenewal(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.renew(), Math.max(1, delayMs));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    if (this.stopped || this.lost) return;
    try {
      const owned = await this.extend(this.policy.leaseMs);
      if (!owned) return;
      if (this.policy.watchdog) this.scheduleRenewal(this.policy.leaseMs / 3);
    } catch (error) {
      if (!(error instanceof LockBackendError)) throw error;
      const left = this.expiresAt - Date.now();
      if (left <= 0) {
        this.markLost('renewal-failed');
      } else {
        // Redis is away: try again before the lease runs out.
        this.scheduleRenewal(Math.max(50, left / 3));
      }
    }
  }

  /** An explicit lease just ends: tell the holder when it does. */
  private scheduleExpiryNotice(): void {
    if (this.stopped) return;
    const left = this.expiresAt - Date.now();
    this.timer = setTimeout(
      () => {
        if (!this.stopped) this.markLost('lease-expired');
      },
      Math.max(0, left),
    );
    this.timer.unref();
  }

  private markLost(reason: LockLostReason): void {
    if (this.lost) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.lostWith = new LockLostError(
      this.name,
      `Lock "${this.name}" was lost (${reason})`,
    );
    this.controller?.abort(this.lostWith);
    this.onLost(this, reason);
  }
}
