import type { LockBackend } from '../backends/lock-backend.js';
import type { ProcessSession } from '../session/process-session.js';
import type { HeldKey } from './held-key.js';
import type { LockLostReason } from './lock-events.js';

/** How a hold keeps its lease. */
export interface LeasePolicy {
  /** Lease length in ms. */
  readonly leaseMs: number;
  /** True: renew every leaseMs/3 until released (no explicit `leaseTime`). */
  readonly watchdog: boolean;
  /**
   * The process session the hold is bound to (its token names it): the hold
   * is lost when the session lapses, whatever its own lease.
   */
  readonly session?: ProcessSession;
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
  /** When the acquisition was sent (monotonic ms), so the local expiry errs early, never late. */
  readonly sentAt: number;
  readonly backend: LockBackend;
  readonly onLost: (held: HeldKey, reason: LockLostReason) => void;
}
