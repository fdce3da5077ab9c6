import type { LockBusy, LockGrant } from '../lock-backend.js';

/**
 * When an acquisition began: by the time of day, which its wait counts from,
 * and on the monotonic clock, which the leases it is granted count from.
 */
export interface Started {
  readonly at: number;
  readonly calledAt: number;
  /**
   * It freed the lock from a holder whose process session was gone already,
   * and does not look at the holder's session again.
   */
  readonly freedDeadHolder?: boolean;
}

/** One acquisition waiting for a busy lock. */
export interface Waiter {
  /** {@link handoffId} of its key and token. */
  readonly id: string;
  readonly key: string;
  readonly token: string;
  readonly leaseMs: number;
  /** It wants its fencing token with the grant (`AcquireRequest.fence`). */
  readonly fence: boolean;
  /** When the acquisition began (ms since epoch). */
  readonly startedAt: number;
  /** When the acquisition began, on the monotonic clock: grants' leases count from here. */
  readonly calledAt: number;
  /**
   * When the command that first queued it (or, while it waits only here, the
   * acquisition) was sent, on the monotonic clock: no lock was handed to it
   * earlier, so a hand-off's lease counts from here.
   */
  readonly queuedAt: number;
  readonly deadline: number;
  /**
   * Its entry in the key's queue in Redis; undefined while it waits only here,
   * behind a lock this process holds (see `Acquisitions.waitBehind`).
   */
  entry?: string;
  cancelling: boolean;
  /** A hand-off reached it while it was giving up (the cancel script then decides). */
  handedOver: boolean;
  /** Its grant may have lapsed and is being confirmed with Redis (see `Grants.grant`). */
  confirming: boolean;
  /** How the wait ended; undefined while waiting. */
  outcome?: 'acquired' | 'not-acquired';
  timer?: NodeJS.Timeout;
  readonly signal?: AbortSignal;
  readonly onAbort: () => void;
  readonly resolve: (result: LockGrant | LockBusy) => void;
  readonly reject: (error: unknown) => void;
}

/** Whether `waiter`'s wait ran out or was aborted. */
export function isDue(waiter: Waiter): boolean {
  return waiter.deadline <= Date.now() || waiter.signal?.aborted === true;
}
