import { monotonicNow } from '../../lease/lease-clock.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import type { LockContext } from './lock-context.js';
import { handoffId } from './lock-keys.js';
import { busy } from './lock-replies.js';
import { isDue, type Started, type Waiter } from './waiter.js';

/**
 * How leaving the queue went: the lock had been handed to the waiter and it
 * kept it (its lease set no earlier than `sentAt`, monotonic), or it left.
 */
export type CancelOutcome =
  | { claimed: true; fencingToken: number; sentAt: number; leaseMs: number }
  | { claimed: false; holderPttl: number };

/**
 * Waiting for a busy lock: a waiter is registered, woken by a hand-off (see
 * `Grants.deliver`), checked on by `QueueChecks`, and gives up when its time
 * runs out or its signal aborts, leaving the queue unless the lock reached it
 * meanwhile.
 */
export class Waiting {
  constructor(private readonly c: LockContext) {}

  /**
   * Waits for the lock: `entry` is the waiter's entry in Redis's queue
   * (undefined while it waits only here), `queuedAt` when the command that
   * queued it was sent, `holderPttl` how long the holder's lease has left.
   */
  wait(
    request: AcquireRequest,
    entry: string | undefined,
    started: Started,
    queuedAt: number,
    deadline: number,
    holderPttl: number,
  ): Promise<LockGrant | LockBusy> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        id: handoffId(request.key, request.token),
        key: request.key,
        token: request.token,
        leaseMs: request.leaseMs,
        fence: request.fence === true,
        startedAt: started.at,
        calledAt: started.calledAt,
        queuedAt,
        deadline,
        entry,
        cancelling: false,
        handedOver: false,
        confirming: false,
        signal: request.signal,
        onAbort: () => void this.c.calls.track(this.giveUp(waiter)),
        resolve,
        reject,
      };
      this.c.waiters.add(waiter);
      waiter.timer = setTimeout(
        waiter.onAbort,
        Math.max(0, deadline - Date.now()),
      );
      request.signal?.addEventListener('abort', waiter.onAbort, { once: true });

      const early = this.c.waiters.takeEarlyHandoff(waiter.id);
      if (early !== undefined) {
        this.c.grants.grant(
          waiter,
          early,
          queuedAt,
          this.c.handoffLease(waiter),
        );
        // Granted; or being confirmed, after which it may wait on.
        if (!this.c.waiters.has(waiter)) return;
      }
      if (request.signal?.aborted) {
        // Aborted while the acquisition was on its way, before the listener
        // was added: an 'abort' event will not come again.
        waiter.onAbort();
      } else {
        this.c.checks.schedule(waiter.key, holderPttl);
      }
      this.c.listener.listen();
    });
  }

  /**
   * `waiter` waits on after a confirmation found its grant lapsed, or a pass
   * found the lock lost: it gives up now if its time ran out meanwhile (its
   * timer found it busy), and otherwise is checked on and listened for.
   */
  waitOn(waiter: Waiter): void {
    if (!this.c.waiters.has(waiter)) return;
    if (isDue(waiter)) {
      void this.c.calls.track(this.giveUp(waiter));
      return;
    }
    this.c.checks.schedule(waiter.key, this.c.settings.handoffLeaseMs);
    this.c.listener.listen();
  }

  /** Leaves the queue with `entry`; a lock handed to `token` meanwhile is kept, and reported. */
  async cancelEntry(
    key: string,
    token: string,
    entry: string,
  ): Promise<CancelOutcome> {
    const sentAt = monotonicNow();
    const reply = (await this.c.calls.call(
      this.c.commands.cancel(key, token, entry),
      'cancel',
      // It kept a lock it was handed, but nobody heard: nobody holds it.
      (late) => {
        const [kept, fencingToken] = late as [number, number];
        if (kept === 1)
          this.c.releases.giveBack(key, token, Number(fencingToken));
      },
    )) as [number, number, number?];
    if (reply[0] !== 1) return { claimed: false, holderPttl: Number(reply[1]) };
    return {
      claimed: true,
      fencingToken: Number(reply[1]),
      sentAt,
      leaseMs: Math.max(1, Number(reply[2])),
    };
  }

  /** The wait ran out or was aborted: leave the queue, unless the lock arrived meanwhile. */
  private async giveUp(waiter: Waiter): Promise<void> {
    if (
      waiter.cancelling ||
      // Its grant is being confirmed, which settles it either way.
      waiter.confirming ||
      !this.c.waiters.has(waiter)
    )
      return;
    waiter.cancelling = true;
    if (waiter.entry === undefined) {
      // Not queued in Redis (if a requeue is on its way, it gives back what
      // it gets for a waiter that left).
      const hold = this.c.holds.get(waiter.key);
      this.c.waiters.settle(
        waiter,
        busy(hold ? hold.expiresAt - monotonicNow() : 0),
      );
      return;
    }
    try {
      let entry: string;
      let outcome: CancelOutcome;
      do {
        // Queued again (by a check) while the cancel was on its way: leave
        // with the new entry too.
        entry = waiter.entry;
        outcome = await this.cancelEntry(waiter.key, waiter.token, entry);
      } while (!outcome.claimed && waiter.entry !== entry);
      if (outcome.claimed) {
        const granted = this.c.grants.grant(
          waiter,
          outcome.fencingToken,
          outcome.sentAt,
          outcome.leaseMs,
        );
        // Its hand-off message may still be on its way: ignore it then.
        if (granted && !waiter.handedOver)
          this.c.waiters.claimed.remember(waiter.id);
      } else {
        this.c.waiters.settle(waiter, busy(outcome.holderPttl));
      }
    } catch (error) {
      this.c.waiters.settle(waiter, error as Error);
    }
  }
}
