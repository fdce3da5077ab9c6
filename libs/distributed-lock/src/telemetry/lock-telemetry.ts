import { LockNotAcquiredError } from '../errors/lock-errors.js';
import type { HeldKey } from '../lock-service/held-key.js';
import type { LockLostReason } from '../lock-service/lock-events.js';
import type { LockHandle } from '../lock-service/lock-handle.js';
import type { AcquireOutcome, LockObserver } from './lock-observer.js';

/** What is known of a held key for its `holdEnded` report. */
interface HoldStart {
  readonly name: string;
  readonly grantedAt: number;
  readonly callerContext: unknown;
}

/**
 * The bookkeeping between `LockService` and its observer: times each
 * acquisition, remembers each held key's name and grant time, and reports
 * each hold's end once (lost, then released, is one end).
 */
export class LockTelemetry {
  private readonly holds = new WeakMap<HeldKey, HoldStart>();

  constructor(private readonly observer: LockObserver) {}

  /** Whether an acquisition starting now is to be reported. */
  get active(): boolean {
    return this.observer.isActive?.() ?? true;
  }

  /** Reports the acquisition `started` is, under `name`. */
  acquisition(
    name: string,
    keys: readonly string[],
    waitTime: number,
    signal: AbortSignal | undefined,
    started: Promise<LockHandle>,
  ): Promise<LockHandle> {
    const startedAt = Date.now();
    this.observer.acquireStarted(name);
    const ended = (outcome: AcquireOutcome, fencingToken?: number): void =>
      this.observer.acquireEnded({
        name,
        keys,
        outcome,
        startedAt,
        endedAt: Date.now(),
        fencingToken,
      });
    return started.then(
      (handle) => {
        ended('acquired', handle.fencingToken);
        return handle;
      },
      (error: unknown) => {
        ended(outcomeOf(error, waitTime, signal));
        throw error;
      },
    );
  }

  /** `held` was granted now, for an acquisition named `name`. */
  held(held: HeldKey, name: string): void {
    this.holds.set(held, {
      name,
      grantedAt: Date.now(),
      callerContext: this.observer.callerContext?.(),
    });
    this.observer.holdStarted(name);
  }

  /** `held` was released (or dropped at shutdown). */
  released(held: HeldKey): void {
    this.end(held);
  }

  /** `held` was lost while held. */
  lost(held: HeldKey, reason: LockLostReason): void {
    const start = this.holds.get(held);
    if (start) this.observer.lost(start.name, reason);
    this.end(held, reason);
  }

  private end(held: HeldKey, lostReason?: LockLostReason): void {
    const start = this.holds.get(held);
    if (!start) return;
    this.holds.delete(held);
    this.observer.holdEnded({
      name: start.name,
      key: held.name,
      grantedAt: start.grantedAt,
      endedAt: Date.now(),
      fencingToken: held.fencingToken,
      lostReason,
      callerContext: start.callerContext,
    });
  }
}

function outcomeOf(
  error: unknown,
  waitTime: number,
  signal: AbortSignal | undefined,
): AcquireOutcome {
  if (!(error instanceof LockNotAcquiredError)) return 'error';
  if (signal?.aborted) return 'aborted';
  return waitTime === 0 ? 'busy' : 'timeout';
}
