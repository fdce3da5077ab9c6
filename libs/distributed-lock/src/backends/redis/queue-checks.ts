import { monotonicNow } from '../../lease/lease-clock.js';
import type { LockContext } from './lock-context.js';
import { parseAcquireReply } from './lock-replies.js';
import type { Waiter } from './waiter.js';

/**
 * The safety net under waiting: while anyone here waits for a key, it is
 * checked when its holder's lease (or process session) should have ended,
 * and at least every `handoffLeaseMs`. kick.lua serves a lock whose holder
 * died without releasing and reports each waiter's entry; a hand-off whose
 * wake-up was lost is granted from that report, and a waiter whose entry
 * vanished queues again. A holder bound to a process session has its
 * session read at each check: gone, the lock is freed from it at once.
 */
export class QueueChecks {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** When each scheduled check is due (monotonic ms). */
  private readonly dueAt = new Map<string, number>();

  constructor(private readonly c: LockContext) {}

  /** How many keys have a check scheduled. */
  get size(): number {
    return this.timers.size;
  }

  /**
   * Checks `key` just after the holder's lease ends, `holderPttl` ms from now
   * (0: within a millisecond), and at most `handoffLeaseMs` from now; a
   * negative `holderPttl` (no lease known) waits `handoffLeaseMs`. A check
   * due already stands, unless this one is due sooner and the other has not
   * started (a new waiter may know of a holder that died since).
   */
  schedule(key: string, holderPttl: number): void {
    if (this.c.closed) return;
    const { handoffLeaseMs } = this.c.settings;
    const delay =
      holderPttl >= 0
        ? Math.min(holderPttl + 1, handoffLeaseMs)
        : handoffLeaseMs;
    const now = monotonicNow();
    const scheduled = this.timers.get(key);
    if (scheduled) {
      const due = this.dueAt.get(key) ?? 0;
      // Started already (it keeps the slot while it runs), or as soon.
      if (due <= now || due <= now + delay) return;
      clearTimeout(scheduled);
    }
    const timer: NodeJS.Timeout = setTimeout(
      () => void this.c.calls.track(this.check(key, timer)),
      delay,
    );
    timer.unref();
    this.timers.set(key, timer);
    this.dueAt.set(key, now + delay);
  }

  /** Nobody here waits for `key` any more. */
  stop(key: string): void {
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    this.dueAt.delete(key);
  }

  /** Stops every check (the backend is closing). */
  stopAll(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.dueAt.clear();
  }

  /**
   * Queues again, in their original order, waiters whose entries vanished
   * (Redis restarted, the queue aged out, a hand-off to them lapsed unseen),
   * and queues those that waited here for a lock that is no longer held here.
   */
  async requeue(key: string, waiters: Waiter[]): Promise<void> {
    // Sent together: one connection keeps them in order.
    await Promise.all(waiters.map((waiter) => this.requeueOne(key, waiter)));
  }

  async requeueOne(key: string, waiter: Waiter): Promise<void> {
    const { waiters } = this.c;
    if (
      this.c.closed ||
      waiter.cancelling ||
      waiter.confirming ||
      !waiters.has(waiter) ||
      waiters.acquiring.has(waiter.id)
    )
      return;
    const remaining = waiter.deadline - Date.now();
    if (remaining <= 0) return;
    // Marked first: nothing else may queue it again while it subscribes.
    waiters.acquiring.add(waiter.id);
    try {
      const subscribing = this.c.wakeupsFor(key);
      if (subscribing) await subscribing;
      const sentAt = monotonicNow();
      const reply = parseAcquireReply(
        await this.c.calls.call(
          this.c.commands.acquire(key, waiter.token, waiter.leaseMs, remaining),
          'acquire',
          (late) =>
            this.c.releases.undoAcquire(
              key,
              waiter.token,
              parseAcquireReply(late),
            ),
        ),
      );
      if (reply[0] === 1) {
        this.c.grants.grant(waiter, Number(reply[1]), sentAt, waiter.leaseMs);
      } else if (reply[2] !== undefined) {
        // queuedAt stays when it first queued: a late message about an
        // older entry must not look fresh.
        if (waiters.has(waiter)) waiter.entry = reply[2];
        else if (waiter.outcome === 'not-acquired')
          this.c.releases.undoAcquire(key, waiter.token, reply);
      }
    } finally {
      waiters.acquiring.delete(waiter.id);
      const early = waiters.takeEarlyHandoff(waiter.id);
      if (early !== undefined)
        this.c.grants.grant(
          waiter,
          early,
          waiter.queuedAt,
          this.c.handoffLease(waiter),
        );
    }
  }

  /**
   * kick.lua for `waiting`: grants those the lock reached, adds to `missing`
   * those whose entries vanished. Answers the lock's remaining lease and its
   * holder ('' when free).
   */
  private async kick(
    key: string,
    waiting: Waiter[],
    missing: Waiter[],
    deadHolder: string,
  ): Promise<{ pttl: number; holder: string }> {
    const sentAt = monotonicNow();
    const [remaining, fencingToken, states, holder] = (await this.c.calls.call(
      this.c.commands.kick(
        key,
        waiting.map((waiter) => waiter.entry ?? ''),
        deadHolder,
      ),
      'check',
    )) as [number, number, string, string];
    const pttl = Number(remaining);
    for (const [index, waiter] of waiting.entries()) {
      if (states[index] === 'h') {
        // Handed over, but its wake-up was lost (or is still on its way).
        // The lease left is the lock's own, counted from the check.
        if (this.c.grants.grant(waiter, Number(fencingToken), sentAt, pttl))
          this.c.waiters.claimed.remember(waiter.id);
      } else if (states[index] === 'm') {
        missing.push(waiter);
      }
    }
    return { pttl, holder };
  }

  private async check(key: string, timer: NodeJS.Timeout): Promise<void> {
    // The fired timer keeps this key's slot, so no second check runs alongside.
    const waiting: Waiter[] = [];
    const missing: Waiter[] = [];
    const hold = this.c.holds.get(key);
    const held = hold !== undefined && hold.expiresAt > monotonicNow();
    for (const waiter of this.c.waiters.forKey(key)) {
      if (waiter.cancelling || waiter.confirming) continue;
      if (waiter.entry !== undefined) waiting.push(waiter);
      // Waiting here for a hold that ended without a pass (its lease ran out).
      else if (!held) missing.push(waiter);
    }
    let pttl = held
      ? hold.expiresAt - monotonicNow()
      : this.c.settings.handoffLeaseMs;
    try {
      if (waiting.length > 0 && !this.c.closed) {
        const kicked = await this.kick(key, waiting, missing, '');
        pttl = kicked.pttl;
        const sessionLeft =
          kicked.holder === ''
            ? undefined
            : await this.c.holderSessions.left(kicked.holder);
        if (sessionLeft === 0) {
          // Its process died (or was cut off): the lock goes to the queue.
          const live = waiting.filter((waiter) => !missing.includes(waiter));
          pttl = (await this.kick(key, live, missing, kicked.holder)).pttl;
        } else if (sessionLeft !== undefined) {
          pttl = Math.min(pttl, sessionLeft);
        }
      }
      await this.requeue(key, missing);
    } catch {
      // Redis is away; look again later.
    }
    if (this.timers.get(key) !== timer) return;
    this.timers.delete(key);
    this.dueAt.delete(key);
    if (this.c.waiters.hasKey(key)) this.schedule(key, pttl);
  }
}
