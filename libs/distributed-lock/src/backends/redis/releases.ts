import { setImmediate as nextTurn } from 'node:timers/promises';
import { monotonicNow } from '../../lease/lease-clock.js';
import type { PassStreak } from './local-holds.js';
import type { LockContext } from './lock-context.js';
import type { AcquireReply } from './lock-replies.js';
import type { Waiter } from './waiter.js';

/**
 * Events after which ioredis may re-send commands that were in flight: a
 * connection closed; on Cluster, also a node leaving (its commands go to
 * whichever node serves the slot now). A node's failed reconnects elsewhere
 * in the Cluster do not count: a release they would excuse may really have
 * found its lock lost.
 */
const dropEvents = ['close', '-node'] as const;

/**
 * Freeing a lock through Redis, which hands it to the next waiter in the same
 * script, and giving back locks nobody here wants any more.
 */
export class Releases {
  /** Times the client's connection closed: see {@link resent}. */
  private connectionDrops = 0;

  constructor(private readonly c: LockContext) {
    for (const event of dropEvents)
      c.client.on(event, this.countConnectionDrop);
  }

  /**
   * Frees `key` if `token` holds it. A lock held here under contention may go
   * to a waiter here in memory (see `LocalPasses`); an uncontended one is
   * freed by a compare-and-delete.
   */
  release(key: string, token: string): Promise<boolean> {
    const hold = this.c.holds.of(key, token);
    if (hold) return this.c.passes.releaseHeld(key, token, hold);
    if (this.c.isContended(key)) return this.run(key, token);
    return this.releaseUnqueued(key, token);
  }

  /**
   * Frees `key` for the next waiter if `token` still holds it (by the grant
   * `fencingToken`, when given): nobody here wants that lock. Works while
   * closing, never throws.
   */
  giveBack(key: string, token: string, fencingToken?: number): void {
    void this.run(key, token, fencingToken).catch(() => false);
  }

  /** An acquisition nobody waits for any more was applied: give back what it got. */
  undoAcquire(key: string, token: string, reply: AcquireReply): void {
    if (reply[0] === 1) {
      this.giveBack(key, token, Number(reply[1]));
    } else if (reply[2] !== undefined) {
      void this.c.calls.track(
        this.c.waiting
          .cancelEntry(key, token, reply[2])
          .then((outcome) => {
            if (outcome.claimed)
              this.giveBack(key, token, outcome.fencingToken);
          })
          .catch(() => undefined),
      );
    }
  }

  /**
   * Runs release.lua, delivering a hand-off to a waiter here without a trip
   * through Redis. `successor`, a waiter here not queued in Redis, takes the
   * lock should nobody be queued there.
   */
  async run(
    key: string,
    token: string,
    fencingToken?: number,
    passedInMemory?: PassStreak,
    successor?: Waiter,
  ): Promise<boolean> {
    this.c.calls.begin();
    const drops = this.connectionDrops;
    const sentAt = monotonicNow();
    try {
      const result = await this.c.calls.call(
        this.c.commands.release(
          key,
          token,
          fencingToken,
          passedInMemory,
          successor && {
            token: successor.token,
            leaseMs: this.c.handoffLease(successor),
          },
        ),
        'release',
        // Applied after all: a waiter here it was handed to must still hear of it.
        (late) => this.afterRelease(key, late, sentAt),
      );
      const released =
        this.afterRelease(key, result, sentAt) || this.resent(drops);
      if (typeof result === 'string') {
        // Handed to a waiter here: let the new holder run on before the
        // releaser does. Its work is what the other waiters wait for; the
        // releaser's (often queueing again) is not.
        await nextTurn();
      }
      return released;
    } finally {
      this.c.calls.end();
    }
  }

  /** Stops counting connection drops (the backend is closing). */
  close(): void {
    for (const event of dropEvents)
      this.c.client.off(event, this.countConnectionDrop);
  }

  /**
   * The uncontended path: a compare-and-delete that declines when anyone
   * queues, and then the full release, which serves the queue.
   */
  private releaseUnqueued(key: string, token: string): Promise<boolean> {
    const drops = this.connectionDrops;
    return this.c.calls.call(
      this.c.commands.releaseUnqueued(key, token),
      'release',
      // Declined after all, for a queue: serve it, as a release that had
      // answered in time would have.
      (late) => {
        if (Number(late) === -1) this.giveBack(key, token);
      },
      (reply) => {
        const result = Number(reply);
        if (result !== -1) return result === 1 || this.resent(drops);
        this.c.contended.remember(key);
        return this.run(key, token);
      },
    );
  }

  /**
   * Whether a command sent when the connection had dropped `drops` times may
   * have run twice: ioredis re-sends what was in flight when a connection
   * drops. A release that finds its token gone then most likely freed the
   * lock in its first run, whose answer was lost: it counts as released. (The
   * holder's own deadline tells a lease that ran out before.)
   */
  private resent(drops: number): boolean {
    return this.connectionDrops !== drops;
  }

  private readonly countConnectionDrop = (): void => {
    this.connectionDrops += 1;
  };

  private afterRelease(key: string, result: unknown, sentAt: number): boolean {
    if (typeof result === 'string') {
      // Handed to a waiter of this process: deliver it without a trip through Redis.
      const [nextToken, fencingToken, passes, sinceFirstMs] = result.split('|');
      const streak =
        passes === undefined
          ? undefined
          : { passes: Number(passes), sinceFirstMs: Number(sinceFirstMs) };
      this.c.grants.deliver(
        nextToken,
        Number(fencingToken),
        key,
        sentAt,
        streak,
      );
      return true;
    }
    return Number(result) === 1;
  }
}
