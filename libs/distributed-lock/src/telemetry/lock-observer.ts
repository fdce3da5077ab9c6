import type { LockLostReason } from '../lock-service/lock-events.js';

/** How an acquisition ended, as metrics and traces report it. */
export type AcquireOutcome =
  /** The caller holds the lock. */
  | 'acquired'
  /** Busy, and the caller asked not to wait (`waitTime: 0`). */
  | 'busy'
  /** Still busy when `waitTime` ran out. */
  | 'timeout'
  /** The caller's `signal` stopped the wait. */
  | 'aborted'
  /** The store failed or answered too late (`LockBackendError`), or another error. */
  | 'error';

/** One acquisition that ended. */
export interface AcquireRecord {
  /** The lock's name for metrics (its key template; see {@link lockNameOf}). */
  readonly name: string;
  /** The keys asked for, without prefix. */
  readonly keys: readonly string[];
  readonly outcome: AcquireOutcome;
  /** When it began, ms since epoch. */
  readonly startedAt: number;
  /** When it ended, ms since epoch. */
  readonly endedAt: number;
  /** The first key's fencing token, when the grant carried one. */
  readonly fencingToken?: number;
}

/** One held key that was released or lost. */
export interface HoldRecord {
  readonly name: string;
  readonly key: string;
  /** When it was granted, ms since epoch. */
  readonly grantedAt: number;
  /** When it was released (or found lost), ms since epoch. */
  readonly endedAt: number;
  readonly fencingToken?: number;
  /** Why it stopped being ours before its release, if it did. */
  readonly lostReason?: LockLostReason;
  /** What {@link LockObserver.callerContext} returned when it was granted. */
  readonly callerContext?: unknown;
}

/** Who gave the caller the lock, when it was not taken free. */
export type HandoffKind =
  /** Passed between callers of this process without a round trip to take it. */
  | 'local'
  /** Handed over by the store to the head of its queue. */
  | 'remote';

/** The backend calls a failure is counted under. */
export type BackendOperation =
  | 'acquire'
  | 'extend'
  | 'release'
  | 'fence'
  | 'is-locked'
  | 'session-open'
  | 'session-renew'
  | 'session-end';

/**
 * What `LockService` and its backend report to metrics and traces. Every
 * method must return quickly and never throw: it runs on the lock's path.
 * Nothing calls an observer unless one is configured, so a service without
 * metrics or traces pays nothing.
 */
export interface LockObserver {
  /** An acquisition began (for the waiters gauge). */
  acquireStarted(name: string): void;
  /** An acquisition ended, however it ended. */
  acquireEnded(record: AcquireRecord): void;
  /** A key is now held (for the holds gauge). */
  holdStarted(name: string): void;
  /** A held key was released or lost. Called once per hold. */
  holdEnded(record: HoldRecord): void;
  /** A held key was lost while held. */
  lost(name: string, reason: LockLostReason): void;
  /** A grant came from a hand-off. */
  handoff(kind: HandoffKind): void;
  /**
   * A renewal answered: of a lock's own lease (watchdog renewals and
   * `extend()`), or of the process session. `kept` false: it was gone.
   */
  renewal(kind: 'lease' | 'session', kept: boolean): void;
  /** A backend call failed (unreachable or too slow store). */
  backendError(operation: BackendOperation): void;
  /**
   * The caller's context where a key was granted (the active trace
   * context), handed back in that hold's {@link HoldRecord}.
   */
  callerContext?(): unknown;
  /**
   * Whether it wants to hear of an acquisition starting now (traces: only
   * once a tracer provider is registered). Asked once per acquisition; one
   * that starts unheard is never reported, nor are its holds. Without it,
   * always.
   */
  isActive?(): boolean;
}

/** Every one of `observers`, as one; undefined when there is none. */
export function combineObservers(
  observers: readonly (LockObserver | undefined)[],
): LockObserver | undefined {
  const present = observers.filter((o): o is LockObserver => o !== undefined);
  if (present.length <= 1) return present[0];
  const each =
    <K extends Exclude<keyof LockObserver, 'callerContext' | 'isActive'>>(
      method: K,
    ) =>
    (...args: Parameters<LockObserver[K]>): void => {
      for (const observer of present)
        (observer[method] as (...a: Parameters<LockObserver[K]>) => void)(
          ...args,
        );
    };
  return {
    acquireStarted: each('acquireStarted'),
    acquireEnded: each('acquireEnded'),
    holdStarted: each('holdStarted'),
    holdEnded: each('holdEnded'),
    lost: each('lost'),
    handoff: each('handoff'),
    renewal: each('renewal'),
    backendError: each('backendError'),
    callerContext: present.find((o) => o.callerContext)?.callerContext,
    isActive: present.every((o) => o.isActive)
      ? () => present.some((o) => o.isActive?.())
      : undefined,
  };
}

/**
 * The name a lock is reported under when the caller gave none: the key with
 * everything after its first `:` replaced by `*` (`coupon:42` → `coupon:*`),
 * so that label values stay few however many keys there are. Several keys
 * are joined with `,`. The decorator passes its key template instead.
 */
export function lockNameOf(keyOrKeys: string | readonly string[]): string {
  if (typeof keyOrKeys === 'string') return keyShape(keyOrKeys);
  if (!Array.isArray(keyOrKeys)) return 'invalid';
  return [...new Set(keyOrKeys.map(keyShape))].toSorted().join(',');
}

function keyShape(key: unknown): string {
  if (typeof key !== 'string') return 'invalid';
  const colon = key.indexOf(':');
  return colon < 0 ? key : `${key.slice(0, colon)}:*`;
}
