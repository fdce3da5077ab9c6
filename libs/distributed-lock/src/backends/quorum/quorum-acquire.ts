import { setImmediate as nextTurn } from 'node:timers/promises';
import { LockBackendError } from '../../errors/lock-errors.js';
import { monotonicNow } from '../../lease/lease-clock.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import {
  runRound,
  type AcquireContext,
  type Attempt,
  type SessionHolder,
} from './quorum-round.js';

/** `setTimeout` fires at once for delays above this. */
const longestTimerMs = 2_147_483_647;

/** Rounds sent again at once, each after finding another holder's session lapsed. */
const roundsAfterLapses = 2;

/**
 * One call of {@link QuorumLockBackend.acquire}: a Redlock round on every
 * node (see {@link runRound}) and, while the wait lasts, more rounds when
 * woken.
 *
 * A waiter first tries once; if the lock is busy it subscribes to the key's
 * wake channel on every node, waits for the subscription to be confirmed,
 * and tries again, so a release between its attempt and its wait always
 * wakes it. Then it sleeps until a node publishes a release, or until the
 * earliest moment a node reported (the holder's remaining lease, for a holder
 * that dies without releasing; or when an earlier waiter lapses). A split
 * vote is waited out the same way: whoever else took votes either holds a
 * majority, and publishes when it releases, or gives them back, which
 * publishes too. Only an attempt whose majority came too late for a valid
 * lease, or that reached too few nodes, is retried after a random delay
 * around `retryDelayMs`.
 *
 * A holder bound to a session that some node saw gone is looked up on every
 * node; if it is gone on a majority, the lock is free, and the next round,
 * sent at once, frees it on every node (see quorum-sessions.ts). Otherwise
 * the waiter wakes again when a majority may have lapsed.
 */
export class QuorumAcquisition {
  readonly result: Promise<LockGrant | LockBusy>;
  private resolve!: (result: LockGrant | LockBusy) => void;
  private reject!: (error: unknown) => void;
  private readonly calledAt = monotonicNow();
  /** The waiter's place in every node's queue: its arrival on this clock. */
  private readonly arrival = Date.now();
  private readonly deadline: number;
  private settled = false;
  /** Wake-ups published so far. */
  private wakes = 0;
  private wakeUp?: () => void;
  private timer?: NodeJS.Timeout;
  private stopListening?: () => void;
  /** An attempt is under way: its votes may still come. */
  private inFlight = false;
  /** The stragglers of the last lost attempt, handled (see {@link attempt}). */
  private stragglers?: Promise<void>;
  /** When the last attempt was answered (monotonic): its lease hints date from then. */
  private answeredAt = 0;
  /** Holders seen with their session gone on a majority. */
  private readonly lapsedHolders: string[] = [];

  constructor(
    private readonly context: AcquireContext,
    private readonly request: AcquireRequest,
    private readonly onDone: (acquisition: QuorumAcquisition) => void,
  ) {
    this.deadline =
      this.calledAt + Math.min(Math.max(0, request.waitMs), longestTimerMs);
    this.result = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    void this.run().catch((error: unknown) =>
      this.settle(
        error instanceof Error ? error : new LockBackendError(String(error)),
      ),
    );
  }

  /** Stops waiting: resolves busy (abort, close). */
  readonly cancel = (): void => this.settle({ acquired: false });

  private get waits(): boolean {
    return this.request.waitMs > 0 && !this.request.signal?.aborted;
  }

  private async run(): Promise<void> {
    let attempt = await this.attempt();
    if (attempt.kind === 'granted' || !this.waits || this.settled)
      return this.finish(attempt);
    this.request.signal?.addEventListener('abort', this.cancel, { once: true });
    const stop = await this.context.channels.listen(
      this.request.key,
      this.onWake,
    );
    if (this.settled) return stop();
    this.stopListening = stop;
    for (;;) {
      const wakesBefore = this.wakes;
      attempt = await this.attempt();
      if (this.settled) return;
      if (attempt.kind === 'granted' || monotonicNow() >= this.deadline)
        return this.finish(attempt);
      const delay = this.wakes !== wakesBefore ? 0 : this.delayAfter(attempt);
      // A timer may fire a little early by the monotonic clock: one set for
      // the end of the wait ends it.
      const untilDeadline = this.deadline - monotonicNow();
      const woken = await this.sleep(Math.min(delay, untilDeadline));
      if (this.settled) return;
      if (!woken && (delay >= untilDeadline || monotonicNow() >= this.deadline))
        return this.finish(attempt);
      // Lets the other nodes' messages of the same release arrive, so they
      // do not each cause another attempt.
      if (woken) await nextTurn();
    }
  }

  private delayAfter(attempt: Attempt): number {
    if (attempt.kind === 'busy' && !attempt.lapsed) {
      // Just after the node's moment, not before it.
      if (attempt.wakeInMs !== undefined) return attempt.wakeInMs + 1;
      // No node said when: its votes did not count (restarted lately,
      // reconnecting), and nothing will publish when that ends. Try again.
      return this.context.retryDelayMs * (0.5 + Math.random());
    }
    return this.context.retryDelayMs * (0.5 + Math.random());
  }

  private readonly onWake = (releasedBy: string): void => {
    // Its own give-back frees nothing it could take.
    if (releasedBy === this.request.token) return;
    this.wakes += 1;
    this.wakeUp?.();
  };

  /** Resolves true when woken by a release, false at the timer or when settled. */
  private sleep(ms: number): Promise<boolean> {
    const delay = Math.min(ms, longestTimerMs);
    return new Promise((resolve) => {
      const wakesBefore = this.wakes;
      const done = (): void => {
        clearTimeout(this.timer);
        this.timer = undefined;
        this.wakeUp = undefined;
        resolve(this.wakes !== wakesBefore);
      };
      this.wakeUp = done;
      this.timer = setTimeout(done, Math.max(0, delay));
    });
  }

  /**
   * One round, and another at once when a holder it met turns out to have
   * lapsed; when that cannot be told yet, the busy attempt says when to look
   * again.
   */
  private async attempt(): Promise<Attempt> {
    for (let again = 0; ; again++) {
      const attempt = await this.round();
      const holders = attempt.kind === 'busy' ? attempt.sessionHolders : [];
      if (attempt.kind !== 'busy' || !holders?.length || this.settled)
        return attempt;
      const check = await this.checkHolders(holders);
      if (!check.lapsedNow || again === roundsAfterLapses || this.settled) {
        const { lapsesInMs } = check;
        if (lapsesInMs === undefined) return attempt;
        return {
          ...attempt,
          wakeInMs: Math.min(attempt.wakeInMs ?? lapsesInMs, lapsesInMs),
        };
      }
    }
  }

  /** Looks up the sessions some node saw gone; notes those gone on a majority. */
  private async checkHolders(
    holders: readonly SessionHolder[],
  ): Promise<{ lapsedNow: boolean; lapsesInMs?: number }> {
    let lapsedNow = false;
    let lapsesInMs: number | undefined;
    await Promise.all(
      holders.map(async ({ token, goneSomewhere }) => {
        if (!goneSomewhere || this.lapsedHolders.includes(token)) return;
        const check = await this.context.sessions.holderLapsed(token);
        if (check.lapsed) {
          this.lapsedHolders.push(token);
          lapsedNow = true;
        } else if (check.lapsesInMs !== undefined) {
          lapsesInMs = Math.min(
            lapsesInMs ?? check.lapsesInMs,
            check.lapsesInMs,
          );
        }
      }),
    );
    return { lapsedNow, lapsesInMs };
  }

  /** One round on every node, after the stragglers of the last lost one. */
  private async round(): Promise<Attempt> {
    // Most rounds follow none: no await, and no promise, for them.
    if (this.stragglers) {
      await this.stragglers;
      this.stragglers = undefined;
    }
    // Settled meanwhile: a round sent now would come after the queue was
    // left, and a grant it won would be nobody's.
    if (this.settled) return { kind: 'busy', lapsed: false };
    this.inFlight = true;
    const round = await runRound(this.context, {
      key: this.request.key,
      token: this.request.token,
      leaseMs: this.request.leaseMs,
      arrival: this.arrival,
      calledAt: this.calledAt,
      waitLeft: () => this.waitLeft(),
      lapsedHolders: this.lapsedHolders,
    });
    this.inFlight = false;
    this.answeredAt = monotonicNow();
    this.stragglers = round.stragglers;
    return round.attempt;
  }

  /** The wait left, as the nodes' queues keep it (0: not waiting). */
  private waitLeft(): number {
    if (!this.waits || this.settled) return 0;
    return Math.max(1, Math.ceil(this.deadline - monotonicNow()));
  }

  /** Settles with `attempt`'s outcome: granted, busy, or unreachable. */
  private finish(attempt: Attempt): void {
    if (attempt.kind === 'granted') {
      this.settle({ acquired: true, leaseMs: attempt.leaseMs });
    } else if (attempt.kind === 'unreachable') {
      this.settle(new LockBackendError(attempt.message));
    } else if (this.reachableNow() < this.context.quorum) {
      // Waited in vain because the nodes went away meanwhile: say so.
      this.settle(
        new LockBackendError(
          `Only ${this.reachableNow()} of ${this.context.scripts.length} Redis nodes are reachable now; a majority is ${this.context.quorum}`,
        ),
      );
    } else {
      // The holder's lease as the last round saw it, less the time since.
      const left =
        attempt.retryAfterMs === undefined
          ? undefined
          : Math.floor(
              attempt.retryAfterMs - (monotonicNow() - this.answeredAt),
            );
      this.settle(
        left === undefined || left <= 0
          ? { acquired: false }
          : { acquired: false, retryAfterMs: left },
      );
    }
  }

  /** Nodes whose connection is up now. */
  private reachableNow(): number {
    const { scripts, guard } = this.context;
    return scripts.filter((_, node) => guard.reachable(node)).length;
  }

  private settle(outcome: LockGrant | LockBusy | Error): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.wakeUp?.();
    this.request.signal?.removeEventListener('abort', this.cancel);
    this.stopListening?.();
    this.stopListening = undefined;
    this.onDone(this);
    if (outcome instanceof Error) {
      if (this.request.waitMs > 0 || this.inFlight) this.leaveQueue();
      this.reject(outcome);
      return;
    }
    if (!outcome.acquired && (this.request.waitMs > 0 || this.inFlight))
      this.leaveQueue();
    this.resolve(outcome);
  }

  /**
   * Leaves the queue on every node, and deletes the lock wherever an attempt
   * still under way grants it after all: sent after that attempt on the same
   * connection, this runs after it.
   */
  private leaveQueue(): void {
    const { scripts, waiterGraceMs } = this.context;
    for (const script of scripts) {
      this.context.track(
        script.release(
          this.request.key,
          this.request.token,
          Math.ceil(waiterGraceMs),
        ),
      );
    }
  }
}
