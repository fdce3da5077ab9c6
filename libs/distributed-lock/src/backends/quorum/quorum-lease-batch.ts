import { LockBackendError } from '../../errors/lock-errors.js';
import { leaseDeadline, monotonicNow } from '../../lease/lease-clock.js';
import {
  askEveryNode,
  describeSilence,
  verdict,
  type Majority,
  type NodeReply,
} from './node-votes.js';
import type { LeaseRenewal, QuorumScripts } from './quorum-scripts.js';
import type { RestartGuard } from './restart-guard.js';

/**
 * How long a lease renewal of a session-bound lock may wait for others to
 * share its call, in ms: at most one batch per node per second.
 *
 * A session hold renews its lock's `maxLeaseMs` lease (30 s by default)
 * every third of it, so the wait delays a renewal that still has two thirds
 * of its lease to go by at most a tenth of that lease (see
 * {@link renewalDelayMs}), and the holder's deadline counts from its own
 * call, before the wait: it can only err early. What the renewals are for
 * (telling a holder that a restarted node took its lock's majority away
 * before that node votes again, `maxLeaseMs` after its restart) is told at
 * most this much later, out of 10 s between renewals by default.
 */
export const leaseBatchWindowMs = 1_000;

/**
 * Renewals sent in one script call per node, at most. Each costs the node a
 * GET and a PEXPIRE (a few µs): a full call keeps the node busy for about
 * 6-11 ms (measured in the tests) and carries ~100 kB, well inside
 * `nodeTimeoutMs`, and two calls a second carry the renewals of 10,000
 * locks (renewed every 10 s).
 */
export const leaseBatchSize = 1_000;

/**
 * The longest a renewal of a `leaseMs` lease waits for its batch: the
 * window, or a tenth of a lease shorter than 10 s, so that a short lease,
 * renewed every third of it, still has more than half of it left when the
 * batch is sent.
 */
export function renewalDelayMs(leaseMs: number): number {
  return Math.min(leaseBatchWindowMs, leaseMs / 10);
}

/** What {@link LeaseBatch} needs of its backend. */
export interface LeaseBatchContext {
  readonly scripts: readonly QuorumScripts[];
  readonly majority: Majority;
  readonly guard: RestartGuard;
  readonly waiterGraceMs: number;
  /** Counts work that outlives the call, for close(). */
  readonly track: (work: Promise<unknown>) => void;
}

interface PendingRenewal extends LeaseRenewal {
  /** The lease asked for, unrounded, for the validity check. */
  readonly askedMs: number;
  readonly resolve: (held: boolean) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Lease renewals of session-bound locks, gathered and sent together: one
 * extend-many.lua call per node per batch (per {@link leaseBatchSize}
 * renewals), instead of one extend.lua call per node per lock.
 *
 * The first renewal into an empty batch starts its timer, due after
 * {@link renewalDelayMs}; a later one that may wait less brings it forward.
 * Each renewal is answered as `extend()` answers a lone one: per lock, the
 * nodes that count (RestartGuard) and set its lease are counted; true when a
 * majority did and the lease, counted from when the batch was sent, is still
 * valid; false when so many said no that a majority cannot hold it; a
 * `LockBackendError` when too few answered to tell. The batch was sent after
 * the caller's call, so a deadline the caller counts from its own call errs
 * early. A lock that lost its majority is told so at its next renewal, up to
 * one window later than a lone extend would have told it.
 */
export class LeaseBatch {
  /** By lock and token (see {@link slot}), in the order they came. */
  private pending = new Map<string, PendingRenewal[]>();
  private timer?: NodeJS.Timeout;
  /** When the timer fires (monotonic ms); Infinity when none is set. */
  private dueAt = Number.POSITIVE_INFINITY;

  constructor(private readonly context: LeaseBatchContext) {}

  /** Renews `key`'s lease with the next batch; see the class comment. */
  extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const renewal: PendingRenewal = {
        key,
        token,
        leaseMs: Math.ceil(leaseMs),
        askedMs: leaseMs,
        resolve,
        reject,
      };
      const id = slot(key, token);
      const same = this.pending.get(id);
      if (same) same.push(renewal);
      else this.pending.set(id, [renewal]);
      const dueAt = monotonicNow() + renewalDelayMs(leaseMs);
      if (dueAt < this.dueAt) this.schedule(dueAt);
    });
  }

  /** Sends every pending renewal now (on close, or when the timer fires). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.dueAt = Number.POSITIVE_INFINITY;
    const batch = [...this.pending.values()].flat();
    this.pending = new Map();
    for (let at = 0; at < batch.length; at += leaseBatchSize)
      this.context.track(this.send(batch.slice(at, at + leaseBatchSize)));
  }

  /**
   * Sends the renewals of `key` by `token` still waiting for their batch
   * now, in a round of their own, before the command the caller sends next
   * on the same connections (a release): the holder asked for them first,
   * and each node answers them first, as it would have without the batch.
   */
  sendAheadOf(key: string, token: string): void {
    const id = slot(key, token);
    const early = this.pending.get(id);
    if (!early) return;
    this.pending.delete(id);
    this.context.track(this.send(early));
  }

  private schedule(dueAt: number): void {
    clearTimeout(this.timer);
    this.dueAt = dueAt;
    this.timer = setTimeout(
      () => this.flush(),
      Math.max(0, dueAt - monotonicNow()),
    );
    this.timer.unref();
  }

  /** One round for `chunk`: settles every renewal in it, never rejects. */
  private async send(chunk: readonly PendingRenewal[]): Promise<void> {
    const { scripts, majority, guard } = this.context;
    const { count, quorum, timeoutMs } = majority;
    const graceMs = Math.ceil(this.context.waiterGraceMs);
    const outcomes = (replies: readonly NodeReply<readonly number[]>[]) =>
      chunk.map((_, i) => {
        let yes = 0;
        for (const r of replies)
          if (r.value[i] === 1 && guard.counts(r.node)) yes += 1;
        return verdict(yes, replies.length - yes, count, quorum);
      });
    try {
      const sentAt = monotonicNow();
      const round = await askEveryNode(
        count,
        (node) => scripts[node].extendMany(chunk, graceMs),
        timeoutMs,
        // Done once more answers cannot change any lock's outcome.
        (replies) => !outcomes(replies).includes('unknown'),
      );
      const decided = outcomes(round.replies);
      chunk.forEach((renewal, i) => {
        const outcome = decided[i];
        if (outcome === 'unknown')
          renewal.reject(
            new LockBackendError(
              describeSilence(
                'extend',
                round.replies.length,
                count,
                quorum,
                round.firstError,
              ),
            ),
          );
        else
          renewal.resolve(
            outcome === 'yes' &&
              leaseDeadline(sentAt, renewal.askedMs) > monotonicNow(),
          );
      });
    } catch (error) {
      // Settling twice is harmless: whoever was not answered is told.
      for (const renewal of chunk) renewal.reject(error);
    }
  }
}

/** Where the renewals of `key` by `token` wait: a token has no newline. */
function slot(key: string, token: string): string {
  return `${key}\n${token}`;
}
