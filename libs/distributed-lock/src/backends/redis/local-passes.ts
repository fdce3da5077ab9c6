import {
  isFresh,
  leaseDeadline,
  monotonicNow,
} from '../../lease/lease-clock.js';
import { sameSession } from '../../session/session-token.js';
import type { LocalHold } from './local-holds.js';
import type { LockContext } from './lock-context.js';
import type { Waiter } from './waiter.js';

/**
 * Releasing a lock held here under contention: it goes to the oldest waiter
 * for it in this process when there is one, in memory and at once, with no
 * wake-up between the two holders. That pass-over of any older waiter
 * elsewhere counts against the same bound as release.lua's local hand-offs
 * (`localHandoffs` in a row, within `localHandoffWindowMs`). The lock stays
 * stored under the token it was first granted to here; pass-on.lua sets the
 * new holder's lease on it, and the new holder runs once Redis confirmed it.
 */
export class LocalPasses {
  constructor(private readonly c: LockContext) {}

  /** Whether local hand-offs may pass over the queue's head at all. */
  get passesInMemory(): boolean {
    const { localHandoffs, localHandoffWindowMs } = this.c.settings;
    return localHandoffs > 0 && localHandoffWindowMs > 0;
  }

  /** Releases `hold`, which `token` has: to a waiter here, or through Redis. */
  releaseHeld(key: string, token: string, hold: LocalHold): Promise<boolean> {
    // Passed on already (or being passed on): a second release of the same hold.
    if (hold.holder !== token) return Promise.resolve(false);
    const mono = monotonicNow();
    const next = this.mayPassOver(hold, mono)
      ? this.c.waiters.oldestLocal(key, Date.now())
      : undefined;
    // The lock stays stored under the first holder's token, so it stays bound
    // to that token's session: only a holder bound to the same one (or, like
    // it, to none) may have it passed on.
    if (next && sameSession(next.token, hold.storedAs)) {
      const leaseMs = this.c.handoffLease(next);
      // A lease about to end is not passed on: its new holder would have to
      // renew it at once, a round trip as long as a release's.
      if (hold.expiresAt - mono >= leaseMs / 2)
        return this.passOn(key, hold, next, leaseMs, mono);
    }
    const successor = this.c.waiters.oldestLocal(key, Date.now(), 'unqueued');
    // With a successor here, the lock most likely stays here: callers asking
    // meanwhile wait behind it in memory, as they would behind a holder.
    if (successor) hold.holder = '';
    else this.c.holds.delete(key);
    return this.releaseToQueue(key, hold, mono, successor);
  }

  /** Forgets a hold found lost, sending its local waiters to the queue. */
  dropHold(key: string): void {
    this.c.holds.delete(key);
    this.queueWaitersBehind(key);
  }

  /**
   * Releases a lock held here through Redis, which serves its queue. Should
   * nobody be queued there, the oldest waiter here that is not queued takes
   * it in the same step; the others keep waiting here behind it. If the lock
   * went elsewhere, they queue in Redis. If Redis does not answer, they fail
   * with the same error: what they waited for can no longer come.
   */
  private async releaseToQueue(
    key: string,
    hold: LocalHold,
    mono: number,
    successor: Waiter | undefined,
  ): Promise<boolean> {
    try {
      const released = await this.c.releases.run(
        key,
        hold.storedAs,
        undefined,
        {
          passes: hold.passesInMemory,
          sinceFirstMs: hold.passes > 0 ? mono - hold.firstPassAt : 0,
        },
        successor,
      );
      // Handed to a waiter here, the lock has a new hold; if not, it is gone.
      this.c.holds.forget(key, hold);
      if (!this.c.holds.has(key)) this.queueWaitersBehind(key);
      return released;
    } catch (error) {
      this.c.holds.forget(key, hold);
      this.failWaitersBehind(key, error);
      throw error;
    }
  }

  /** The lock held here is gone: those who waited for it here queue in Redis. */
  private queueWaitersBehind(key: string): void {
    const unqueued = this.c.waiters.behind(key);
    if (unqueued.length > 0)
      // On failure the next safety check tries again.
      void this.c.calls.track(
        this.c.checks.requeue(key, unqueued).catch(() => undefined),
      );
  }

  /** Redis did not confirm where the lock held here went: its waiters here fail with that error. */
  private failWaitersBehind(key: string, error: unknown): void {
    for (const waiter of this.c.waiters.behind(key)) {
      if (!waiter.confirming) this.c.waiters.settle(waiter, error as Error);
    }
  }

  /** Whether the next hand-off may pass over the queue's head once more (`mono`: monotonic now). */
  private mayPassOver(hold: LocalHold, mono: number): boolean {
    const { localHandoffs, localHandoffWindowMs } = this.c.settings;
    return (
      this.passesInMemory &&
      hold.passes < localHandoffs &&
      (hold.passes === 0 || mono - hold.firstPassAt < localHandoffWindowMs)
    );
  }

  /**
   * Gives the held lock to `next`. The new holder runs only once Redis has
   * confirmed the pass: a lock lost meanwhile (Redis restarted empty, the key
   * deleted) is never passed on. A `next` that wants its fencing token gets
   * it issued by the same command. Resolves with whether it was still ours
   * to give; rejects, and fails the waiters here, when Redis does not answer.
   */
  private passOn(
    key: string,
    hold: LocalHold,
    next: Waiter,
    leaseMs: number,
    mono: number,
  ): Promise<boolean> {
    if (hold.passes === 0) hold.firstPassAt = mono;
    hold.passes += 1;
    hold.passesInMemory += 1;
    // Nobody here holds it until Redis answers; the old lease runs meanwhile.
    hold.holder = '';
    next.confirming = true;
    const sentAt = monotonicNow();
    return this.c.calls
      .call(
        // A waiter that was not queued in Redis has no entry to take out.
        this.c.commands.passOn(
          key,
          hold.storedAs,
          next.entry ?? '',
          leaseMs,
          next.fence,
        ),
        'release',
        // Passed after we gave up on it: nobody here holds it now.
        (late) => {
          if (Number(late) !== 0) this.c.releases.giveBack(key, hold.storedAs);
        },
        (reply) => {
          const passed = Number(reply);
          if (passed === 0) {
            // Lost before it was passed on: its place in Redis's queue was kept.
            this.passLost(key, hold, next);
            return false;
          }
          // Its entry left the queue with the pass.
          next.entry = undefined;
          hold.holder = next.token;
          hold.expiresAt = sentAt + leaseMs;
          // 1 when no fencing token was asked for; a token is far above it.
          const fencingToken = passed === 1 ? undefined : passed;
          if (isFresh(leaseDeadline(sentAt, leaseMs), leaseMs)) {
            next.confirming = false;
            this.takePass(key, hold, next, sentAt + leaseMs, fencingToken);
          } else {
            // Answered so late that the new lease may have lapsed already.
            void this.c.calls.track(
              this.confirmPass(key, hold, next, fencingToken),
            );
          }
          return true;
        },
      )
      .then(
        // The releaser hears back one tick later. Its caller's next steps
        // (often asking for the lock again) would otherwise run first, on
        // the critical path: the new holder's first command leaves only when
        // the microtasks are done (see write-coalescing).
        (passed) =>
          new Promise<boolean>((resolve) => {
            process.nextTick(resolve, passed);
          }),
        (error: unknown) => {
          this.passFailed(key, hold, next, error);
          throw error;
        },
      );
  }

  /** The lock was lost before it could be passed: `next` and the others here queue in Redis. */
  private passLost(key: string, hold: LocalHold, next: Waiter): void {
    next.confirming = false;
    if (this.c.holds.get(key) === hold) this.dropHold(key);
    this.c.waiting.waitOn(next);
  }

  /**
   * Redis did not answer about a pass: the hold is forgotten and the waiters
   * here fail with `error`; `next`, if it is queued in Redis too, waits on
   * there unless its time ran out.
   */
  private passFailed(
    key: string,
    hold: LocalHold,
    next: Waiter,
    error: unknown,
  ): void {
    next.confirming = false;
    this.c.holds.forget(key, hold);
    this.failWaitersBehind(key, error);
    this.c.waiting.waitOn(next);
  }

  /** `next` runs with the lock passed to it, surely held until `expiresAt` (monotonic). */
  private takePass(
    key: string,
    hold: LocalHold,
    next: Waiter,
    expiresAt: number,
    fencingToken: number | undefined,
  ): void {
    const granted = this.c.waiters.settle(next, {
      acquired: true,
      fencingToken,
      leaseMs: expiresAt - next.calledAt,
      handoff: 'local',
    });
    if (granted) return;
    // `next` left (closing) while Redis answered: pass the lock on, or give
    // it back when this backend is closing.
    if (!this.c.closed) {
      void this.c.releases.release(key, next.token).catch(() => false);
      return;
    }
    this.c.holds.delete(key);
    this.c.releases.giveBack(key, hold.storedAs);
  }

  /** A pass confirmed late: sets `next`'s full lease if the lock is still held here, before it runs. */
  private async confirmPass(
    key: string,
    hold: LocalHold,
    next: Waiter,
    fencingToken: number | undefined,
  ): Promise<void> {
    let sentAt: number | undefined;
    try {
      sentAt = await this.c.grants.confirmLease(
        key,
        hold.storedAs,
        next.leaseMs,
      );
    } catch (error) {
      this.passFailed(key, hold, next, error);
      return;
    }
    if (sentAt === undefined) {
      this.passLost(key, hold, next);
      return;
    }
    next.confirming = false;
    hold.expiresAt = sentAt + next.leaseMs;
    this.takePass(key, hold, next, sentAt + next.leaseMs, fencingToken);
  }
}
