import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import { leaseDeadline, monotonicNow } from '../../lease/lease-clock.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from '../lock-backend.js';
import type { LockBackendHealth } from '../backend-health.js';
import { settlesWithin } from '../answer-deadline.js';
import { askForMajority, type Majority } from './node-votes.js';
import { probeQuorum } from './quorum-health.js';
import { QuorumAcquisition } from './quorum-acquire.js';
import { contendedMemoryMs, releaseUnlessQueued } from './quorum-fast-paths.js';
import type { AcquireContext } from './quorum-round.js';
import { issueQuorumFence } from './quorum-fence.js';
import { isLockedOnMajority } from './quorum-is-locked.js';
import { LeaseBatch } from './quorum-lease-batch.js';
import {
  resolveQuorumOptions,
  type QuorumLockBackendOptions,
  type ResolvedQuorumOptions,
} from './quorum-options.js';
import { QuorumScripts } from './quorum-scripts.js';
import { QuorumSessions } from './quorum-sessions.js';
import { WakeChannels } from './quorum-waiting.js';
import { RestartGuard } from './restart-guard.js';
import { sessionOf } from '../../session/session-token.js';
import { TimedMemory } from '../timed-memory.js';

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
 *   it tries again when woken (see `QuorumAcquisition`).
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
 *   reports the renewal failed, and the hold lost at its deadline). The
 *   extend of a lock bound to a session (its token names one) waits for
 *   the next batch of such renewals, at most 1 s (a tenth of a lease
 *   shorter than 10 s), and is answered with the same rules, its validity
 *   counted from when the batch was sent (see `LeaseBatch`); that of
 *   an explicit lease is sent at once.
 * - **release** deletes the lock on every node. It resolves true when a
 *   majority held it, false when enough nodes answered that a majority
 *   cannot have held it, and rejects with `LockBackendError` when too few
 *   answered to tell: the lock then ends with its lease where it remains.
 *   (A release that a reconnection re-sent finds its token gone and counts
 *   it as not held: with several nodes that cannot be told apart from a
 *   lock lost on them.)
 * - **fence** issues strictly increasing tokens across holders through a
 *   read round and a write-back round on majorities: see quorum-fence.ts.
 *   A grant never carries one (`AcquireRequest.fence` is not served in the
 *   acquiring round): those rounds must come after a majority granted, so
 *   `LockService` asks for the token before handing out the lock.
 * - **Restarts**: a node whose `run_id` changed does not vote for
 *   `maxLeaseMs` after this process saw it (see `RestartGuard`).
 * - **sessions** (`QuorumSessions`): a process session is a key on
 *   every node, opened, renewed and ended with one command per node, so its
 *   renewal costs one command per node whatever the number of locks. A lock
 *   bound to it is free once the session is gone on a majority: a waiter
 *   that meets such a holder looks its session up on every node, then frees
 *   the lock with its next round (see quorum-sessions.ts). Waiters wake when
 *   the holder's session may lapse, not at the end of the lock's lease.
 *   Unlike on one Redis, a session hold still renews its own lock's lease,
 *   `holdLeaseMs` = `maxLeaseMs`, every third of it: that is what tells a
 *   holder that a restarted node took its majority away before the node
 *   votes again. Those renewals are batched: one batch per node per second
 *   at most, sent as one extend-many.lua call per 1,000 locks in it (a
 *   renewal still waiting when its lock is released goes ahead of the
 *   release). 10,000 locks held by one process, renewed every 10 s,
 *   make about 1,000 renewals a second: between one and two calls per node
 *   per second, on top of the session's own renewal.
 *
 * acquire (when its wait ends that way), extend, release, fence and isLocked
 * reject with `LockBackendError` when fewer than a majority of the nodes
 * answer in time.
 */
export class QuorumLockBackend implements LockBackend {
  readonly sessions: QuorumSessions;
  private readonly options: ResolvedQuorumOptions;
  private readonly majority: Majority;
  private readonly scripts: QuorumScripts[];
  private readonly guard: RestartGuard;
  private readonly channels: WakeChannels;
  private readonly context: AcquireContext;
  /** Lease renewals of session-bound locks, sent together. */
  private readonly leases: LeaseBatch;
  private readonly acquisitions = new Set<QuorumAcquisition>();
  /** Keys found busy lately: they skip the fast paths (quorum-fast-paths.ts). */
  private readonly contended = new TimedMemory(contendedMemoryMs);
  /** Commands that outlive their call (votes given back, queues left). */
  private readonly background = new Set<Promise<unknown>>();
  private closing?: Promise<void>;

  constructor(options: QuorumLockBackendOptions) {
    this.options = resolveQuorumOptions(options);
    const { nodes, quorum, nodeTimeoutMs, maxLeaseMs, keyPrefix } =
      this.options;
    this.majority = { count: nodes.length, quorum, timeoutMs: nodeTimeoutMs };
    this.scripts = nodes.map((client) => new QuorumScripts(client, keyPrefix));
    this.guard = new RestartGuard(nodes, maxLeaseMs, nodeTimeoutMs);
    this.channels = new WakeChannels(nodes, nodeTimeoutMs, (node) =>
      this.guard.reachable(node),
    );
    this.sessions = new QuorumSessions({
      clients: nodes,
      quorum,
      nodeTimeoutMs,
      keyPrefix,
      holdLeaseMs: maxLeaseMs,
      guard: this.guard,
      track: (work) => this.track(work),
    });
    this.context = {
      scripts: this.scripts,
      quorum: this.options.quorum,
      nodeTimeoutMs,
      retryDelayMs: this.options.retryDelayMs,
      waiterGraceMs: this.options.waiterGraceMs,
      guard: this.guard,
      channels: this.channels,
      sessions: this.sessions,
      contended: this.contended,
      track: (work) => this.track(work),
    };
    this.leases = new LeaseBatch({
      scripts: this.scripts,
      majority: this.majority,
      guard: this.guard,
      waiterGraceMs: this.options.waiterGraceMs,
      track: (work) => this.track(work),
    });
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
    // A session hold's renewal waits for its batch; an explicit lease is set now.
    if (sessionOf(token) !== undefined)
      return this.leases.extend(key, token, leaseMs);
    const graceMs = Math.ceil(this.options.waiterGraceMs);
    const sentAt = monotonicNow();
    // Too few answers to tell whether the lock is still held reject (the
    // holder is told its renewal failed), rather than say "lost".
    const held = await askForMajority(
      'extend',
      this.majority,
      (node) =>
        this.scripts[node].extend(key, token, Math.ceil(leaseMs), graceMs),
      (r) => r.value === 1 && this.guard.counts(r.node),
    );
    return held && leaseDeadline(sentAt, leaseMs) > monotonicNow();
  }

  async release(key: string, token: string): Promise<boolean> {
    this.assertOpen();
    // A renewal asked for before the release is answered before it, as if sent at once.
    this.leases.sendAheadOf(key, token);
    const graceMs = Math.ceil(this.options.waiterGraceMs);
    const busyLately = this.contended.has(key);
    return askForMajority(
      'release',
      this.majority,
      (node) =>
        busyLately
          ? this.scripts[node].release(key, token, graceMs)
          : releaseUnlessQueued(
              this.scripts[node],
              key,
              token,
              graceMs,
              this.contended,
              (work) => this.track(work),
            ),
      (r) => r.value === 1,
    );
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

  /** False also for a lock whose holder's session is gone on a majority. */
  async isLocked(key: string): Promise<boolean> {
    this.assertOpen();
    return isLockedOnMajority(
      {
        scripts: this.scripts,
        quorum: this.options.quorum,
        nodeTimeoutMs: this.options.nodeTimeoutMs,
        sessions: this.sessions,
      },
      key,
    );
  }

  /** See {@link LockBackend.probe}: up while a majority answers and votes. */
  probe(timeoutMs = this.options.nodeTimeoutMs): Promise<LockBackendHealth> {
    return probeQuorum(this.options, this.guard, !!this.closing, timeoutMs);
  }

  /**
   * Settles every waiter as busy, sends the lease renewals still waiting for
   * their batch, lets the commands under way finish (at most twice the node
   * timeout), closes the subscriber connections and the
   * clients this backend owns. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    // Each removes itself from the set as it settles.
    for (const acquisition of this.acquisitions) acquisition.cancel();
    // Answered by their round, within the node timeout, like any extend.
    this.leases.flush();
    // Work under way may start more (late votes given back): wait until
    // none is left, within the bound.
    const patience = monotonicNow() + this.options.nodeTimeoutMs * 2;
    while (this.background.size > 0 && monotonicNow() < patience) {
      await settlesWithin(
        Promise.allSettled(this.background),
        patience - monotonicNow(),
        { unref: true },
      );
    }
    this.channels.close();
    this.guard.close();
    this.contended.clear();
    await Promise.all(
      this.options.nodes.map((client, node) =>
        this.options.owns[node] ? quit(client, this.options.nodeTimeoutMs) : 0,
      ),
    );
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
  const answered = await settlesWithin(client.quit(), timeoutMs, {
    unref: true,
  });
  if (!answered) client.disconnect();
}
