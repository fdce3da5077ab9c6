import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import { leaseDeadline, monotonicNow } from '../../lease/lease-clock.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from '../lock-backend.js';
import {
  askEveryNode,
  describeSilence,
  settlesWithin,
  verdict,
} from './node-votes.js';
import { QuorumAcquisition } from './quorum-acquire.js';
import type { AcquireContext } from './quorum-round.js';
import { issueQuorumFence } from './quorum-fence.js';
import {
  resolveQuorumOptions,
  type QuorumLockBackendOptions,
  type ResolvedQuorumOptions,
} from './quorum-options.js';
import { QuorumScripts } from './quorum-scripts.js';
import { WakeChannels } from './quorum-waiting.js';
import { RestartGuard } from './restart-guard.js';

/**
 * Lock store on several independent Redis masters: Redlock. A lock is held
 * when a majority of the nodes granted it within its lease; one node (of 3)
 * or two (of 5) may fail, restart or be cut off without losing the lock or
 * letting two holders in, under Redlock's timing assumptions (bounded clock
 * drift, see `clockDriftMs`; no process pause longer than the validity).
 *
 * - **acquire** sends the grant to every node at once, each call bounded by
 *   `nodeTimeoutMs`. It wins with a majority of grants and a lease still
 *   valid after the time taken and the drift allowance; the grant's
 *   `leaseMs` is that validity, counted from the call. Otherwise the nodes
 *   that granted it are given their votes back and, while the wait lasts,
 *   it tries again when woken (see {@link QuorumAcquisition}).
 * - **Waiting** is pushed, not polled: a release publishes on the key's
 *   channel on each node, which waiters here subscribe to, plus one timer at
 *   the holder's remaining lease for a holder that dies.
 * - **Approximate FIFO.** Every node keeps a queue of the key's waiters,
 *   scored by each waiter's arrival (its own clock, read once when its
 *   acquisition began; ties by token, so every node sees the same order). A
 *   node grants a free lock only to the earliest live waiter in its queue,
 *   or to anyone while nobody waits there; a newcomer that tries once is
 *   refused while anybody waits. The order is that of the waiters' clocks:
 *   processes whose clocks disagree by d are served out of order by up to d,
 *   and a waiter that a node never heard from (it was cut off) is not
 *   queued there. A waiter that died keeps its place until its wait deadline
 *   or, once the lock is free, for at most `waiterGraceMs` from the later of
 *   the release and its last attempt: that is all it can stall the others.
 * - **extend** succeeds when a majority still held the token and set the new
 *   lease, still valid after the time taken; it resolves false when enough
 *   nodes answered that a majority cannot hold it, and rejects with
 *   `LockBackendError` when too few answered to tell (the service then
 *   reports the renewal failed, and the hold lost at its deadline).
 * - **release** deletes the lock on every node. It resolves true when a
 *   majority held it, false when enough nodes answered that a majority
 *   cannot have held it, and rejects with `LockBackendError` when too few
 *   answered to tell: the lock then ends with its lease where it remains.
 *   (A release that a reconnection re-sent finds its token gone and counts
 *   it as not held: with several nodes that cannot be told apart from a
 *   lock lost on them.)
 * - **fence** issues strictly increasing tokens across holders through a
 *   read round and a write-back round on majorities: see quorum-fence.ts.
 * - **Restarts**: a node whose `run_id` changed does not vote for
 *   `maxLeaseMs` after this process saw it (see {@link RestartGuard}).
 *
 * acquire (when its wait ends that way), extend, release, fence and isLocked
 * reject with `LockBackendError` when fewer than a majority of the nodes
 * answer in time.
 */
export class QuorumLockBackend implements LockBackend {
  private readonly options: ResolvedQuorumOptions;
  private readonly scripts: QuorumScripts[];
  private readonly guard: RestartGuard;
  private readonly channels: WakeChannels;
  private readonly context: AcquireContext;
  private readonly acquisitions = new Set<QuorumAcquisition>();
  /** Commands that outlive their call (votes given back, queues left). */
  private readonly background = new Set<Promise<unknown>>();
  private closing?: Promise<void>;

  constructor(options: QuorumLockBackendOptions) {
    this.options = resolveQuorumOptions(options);
    const { nodes, nodeTimeoutMs, maxLeaseMs } = this.options;
    this.scripts = nodes.map((client) => new QuorumScripts(client));
    this.guard = new RestartGuard(nodes, maxLeaseMs, nodeTimeoutMs);
    this.channels = new WakeChannels(nodes, nodeTimeoutMs, (node) =>
      this.guard.reachable(node),
    );
    this.context = {
      scripts: this.scripts,
      quorum: this.options.quorum,
      nodeTimeoutMs,
      retryDelayMs: this.options.retryDelayMs,
      waiterGraceMs: this.options.waiterGraceMs,
      guard: this.guard,
      channels: this.channels,
      track: (work) => this.track(work),
    };
  }

  /** The nodes whose votes do not count right now (restarted lately, or reconnecting). */
  mutedNodes(): number[] {
    return this.guard.mutedNodes();
  }

  async acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    this.assertOpen();
    assertLease(request.leaseMs);
    if (!(request.waitMs >= 0)) {
      throw new RangeError(`waitMs must be 0 or more, got ${request.waitMs}`);
    }
    this.guard.noteLease(request.leaseMs);
    const acquisition = new QuorumAcquisition(this.context, request, (done) =>
      this.acquisitions.delete(done),
    );
    this.acquisitions.add(acquisition);
    return acquisition.result;
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.assertOpen();
    assertLease(leaseMs);
    this.guard.noteLease(leaseMs);
    const { quorum, waiterGraceMs } = this.options;
    const count = this.scripts.length;
    const sentAt = monotonicNow();
    const counted = (node: number, value: number): boolean =>
      value === 1 && this.guard.counts(node);
    const round = await askEveryNode(
      count,
      (node) =>
        this.scripts[node].extend(
          key,
          token,
          Math.ceil(leaseMs),
          Math.ceil(waiterGraceMs),
        ),
      this.options.nodeTimeoutMs,
      (replies) => {
        const yes = replies.filter((r) => counted(r.node, r.value)).length;
        return yes >= quorum || replies.length - yes > count - quorum;
      },
    );
    const yes = round.replies.filter((r) => counted(r.node, r.value)).length;
    const no = round.replies.length - yes;
    // Too few answered to tell whether the lock is still held: an error (the
    // holder is told its renewal failed), not "lost".
    if (verdict(yes, no, count, quorum) === 'unknown')
      throw new LockBackendError(
        describeSilence(
          'extend',
          round.replies.length,
          count,
          quorum,
          round.firstError,
        ),
      );
    return yes >= quorum && leaseDeadline(sentAt, leaseMs) > monotonicNow();
  }

  async release(key: string, token: string): Promise<boolean> {
    this.assertOpen();
    const released = await this.askMajority(
      'release',
      (node) =>
        this.scripts[node].release(
          key,
          token,
          Math.ceil(this.options.waiterGraceMs),
        ),
      (value) => value === 1,
    );
    return released;
  }

  async fence(key: string, token: string): Promise<number | undefined> {
    this.assertOpen();
    return issueQuorumFence(
      {
        scripts: this.scripts,
        quorum: this.options.quorum,
        nodeTimeoutMs: this.options.nodeTimeoutMs,
        guard: this.guard,
      },
      key,
      token,
    );
  }

  async isLocked(key: string): Promise<boolean> {
    this.assertOpen();
    return this.askMajority(
      'isLocked',
      (node) => this.scripts[node].exists(key),
      (value) => value === 1,
    );
  }

  /**
   * Settles every waiter as busy, lets the commands under way finish (at
   * most twice the node timeout), closes the subscriber connections and the
   * clients this backend owns. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    // Each removes itself from the set as it settles.
    for (const acquisition of this.acquisitions) acquisition.cancel();
    // Work under way may start more (late votes given back): wait until
    // none is left, within the bound.
    const patience = monotonicNow() + this.options.nodeTimeoutMs * 2;
    while (this.background.size > 0 && monotonicNow() < patience) {
      await settlesWithin(
        Promise.allSettled(this.background),
        patience - monotonicNow(),
      );
    }
    this.channels.close();
    this.guard.close();
    await Promise.all(
      this.options.nodes.map((client, node) =>
        this.options.owns[node] ? quit(client, this.options.nodeTimeoutMs) : 0,
      ),
    );
  }

  /**
   * A yes/no question to every node: true when a majority says yes, false
   * when enough said no that it cannot, a `LockBackendError` when too few
   * answered to tell.
   */
  private async askMajority<T>(
    what: string,
    call: (node: number) => Promise<T>,
    isYes: (value: T) => boolean,
  ): Promise<boolean> {
    const { quorum, nodeTimeoutMs } = this.options;
    const count = this.scripts.length;
    const round = await askEveryNode(count, call, nodeTimeoutMs, (replies) => {
      const yes = replies.filter((r) => isYes(r.value)).length;
      return verdict(yes, replies.length - yes, count, quorum) !== 'unknown';
    });
    const yes = round.replies.filter((r) => isYes(r.value)).length;
    const outcome = verdict(yes, round.replies.length - yes, count, quorum);
    if (outcome === 'unknown') {
      throw new LockBackendError(
        describeSilence(
          what,
          round.replies.length,
          count,
          quorum,
          round.firstError,
        ),
      );
    }
    return outcome === 'yes';
  }

  private track(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.background.add(settled);
    void settled.then(() => this.background.delete(settled));
  }

  private assertOpen(): void {
    if (this.closing) throw new LockBackendError('backend closed');
  }
}

function assertLease(leaseMs: number): void {
  if (!(leaseMs > 0 && Number.isFinite(leaseMs))) {
    throw new RangeError(`leaseMs must be a positive number, got ${leaseMs}`);
  }
}

/** QUIT, or a hard disconnect when the node does not answer in time. */
async function quit(client: Redis, timeoutMs: number): Promise<void> {
  if (client.status === 'end') return;
  const answered = await settlesWithin(client.quit(), timeoutMs);
  if (!answered) client.disconnect();
}
