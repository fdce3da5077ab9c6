import { LockBackendError } from '../../errors/lock-errors.js';
import { monotonicNow } from '../../lease/lease-clock.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
  SessionStore,
} from '../lock-backend.js';
import { settlesWithin } from '../answer-deadline.js';
import type { LockBackendHealth } from '../backend-health.js';
import { LockContext } from './lock-context.js';
import { probeRedisBackend } from './redis-health.js';
import {
  resolveRedisLockSettings,
  type RedisLockBackendOptions,
} from './redis-lock-options.js';
import { ReplicaAckCheck } from './replica-acks.js';

export type { RedisLockBackendOptions } from './redis-lock-options.js';

/**
 * Lock store on one Redis server (standalone or behind Sentinel).
 *
 * A key this process has not found busy lately is first tried with a bare
 * `SET NX PX`, the cheapest command that can take a lock. It cannot jump the
 * queue: a release hands the lock to the next waiter in the same step, so a
 * lock with waiters is never free, but for one whose holder died unreleased,
 * which a newcomer may take before the queue's safety check hands it on (the
 * waiters are then served at its release). Such a grant carries no fencing
 * token; {@link fence} issues one when the holder asks. A caller that wants
 * the token with the grant (`AcquireRequest.fence`) sends acquire.lua
 * without queueing instead, which takes the lock and issues the token in
 * the same step, still one round trip; grants from the queue carry their
 * token anyway, and a lock passed on in memory gets it from pass-on.lua.
 *
 * Waiting is a FIFO queue per key: a busy acquisition appends itself to the
 * key's queue, and whoever frees the lock hands it, inside the same script, to
 * the oldest live waiter, then wakes only that waiter by pushing to its
 * process's wake list, which one blocking connection per process pops. Nobody
 * polls, nobody stampedes, and a releasing holder cannot barge back in ahead of
 * the queue. A waiter in the releasing process may go first a bounded number
 * of times in a row and for a short while (`localHandoffs`,
 * `localHandoffWindowMs`), which saves the wake-up. A lock that came from
 * the queue is passed that way in memory, before Redis hears of it: the lock
 * stays stored under the token it was granted to, which this process then
 * uses for whoever holds it here. A per-key safety check (at most every
 * `handoffLeaseMs`) covers a holder that dies without releasing, and reads
 * the holder's process session (see `RedisSessions`).
 *
 * Each job is a room of its own (see `LockContext`); this class is the
 * {@link LockBackend} face they share.
 */
export class RedisLockBackend implements LockBackend {
  private readonly context: LockContext;
  private readonly ownsClient: boolean;
  private readonly replicaAcks?: ReplicaAckCheck;

  constructor(options: RedisLockBackendOptions) {
    this.context = new LockContext(
      options.client,
      resolveRedisLockSettings(options),
    );
    this.ownsClient = options.ownsClient ?? false;
    if (options.replicaAcks)
      this.replicaAcks = new ReplicaAckCheck(
        this.context,
        options.replicaAcks,
        (key, token) => this.release(key, token),
      );
  }

  /** Process sessions, kept in this Redis (see `RedisSessions`). */
  get sessions(): SessionStore {
    return this.context.sessions;
  }

  acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    if (this.context.closed) return Promise.reject(closedError());
    const granted = this.context.acquisitions.acquire(request);
    if (!this.replicaAcks) return granted;
    const check = this.replicaAcks;
    return granted.then((grant) => check.confirm(request, grant));
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const c = this.open();
    const hold = c.holds.of(key, token);
    // Passed on to another holder here: no longer this token's to extend.
    if (hold && hold.holder !== token) return false;
    const sentAt = monotonicNow();
    const result = await c.calls.call(
      c.commands.extend(key, hold?.storedAs ?? token, leaseMs),
      'extend',
    );
    const owned = Number(result) === 1;
    if (hold && c.holds.get(key) === hold && hold.holder === token) {
      if (owned) hold.expiresAt = sentAt + leaseMs;
      else c.passes.dropHold(key);
    }
    return owned;
  }

  /**
   * Frees `key`, handing it to the next waiter. A lock this process holds
   * under contention goes to the oldest waiter for it in this process when
   * there is one, in memory and at once (see `LocalPasses`); Redis is told of
   * it afterwards, which is what the release answers.
   */
  release(key: string, token: string): Promise<boolean> {
    if (this.context.closed) return Promise.reject(closedError());
    return this.context.releases.release(key, token);
  }

  async fence(key: string, token: string): Promise<number | undefined> {
    const c = this.open();
    const hold = c.holds.of(key, token);
    if (hold && hold.holder !== token) return undefined;
    const fence = await c.calls.call(
      c.commands.fence(key, hold?.storedAs ?? token),
      'fence',
    );
    if (fence !== null) return Number(fence);
    if (hold && c.holds.get(key) === hold && hold.holder === token)
      c.passes.dropHold(key);
    return undefined;
  }

  /** Whether `key` is held: stored, and its holder's session (if any) alive. */
  async isLocked(key: string): Promise<boolean> {
    const c = this.open();
    const holder = await c.calls.call(c.client.get(key), 'isLocked');
    if (holder === null) return false;
    return (await c.holderSessions.left(holder)) !== 0;
  }

  async close(): Promise<void> {
    const c = this.context;
    if (c.closed) return;
    c.closed = true;
    c.checks.stopAll();
    c.contended.clear();
    c.holds.clear();
    for (const waiter of c.waiters.values()) {
      c.waiters.settle(waiter, { acquired: false });
      if (waiter.entry === undefined) continue;
      // Leave the queue so nobody hands a lock to a process that is going
      // away; a lock handed to the waiter meanwhile is given back.
      void c.calls.track(
        c.waiting
          .cancelEntry(waiter.key, waiter.token, waiter.entry)
          .then((outcome) => {
            if (outcome.claimed)
              c.grants.grant(
                waiter,
                outcome.fencingToken,
                outcome.sentAt,
                outcome.leaseMs,
              );
          })
          .catch(() => undefined),
      );
    }
    // Answers still on their way (an acquisition, a release that handed the
    // lock to a waiter here) may need one more command to undo what they did.
    // Each is bounded by the command timeout; so is the whole wait, in case
    // late answers keep arriving.
    const { commandTimeoutMs } = c.settings;
    await c.calls.drain(2 * commandTimeoutMs);
    c.releases.close();
    c.listener.close();
    c.sessions.close();
    c.holderSessions.clear();
    this.replicaAcks?.close();
    if (this.ownsClient) {
      // A Redis that stopped answering must not hold up the app's shutdown.
      const quit = c.client.quit().catch(() => undefined);
      if (!(await settlesWithin(quit, commandTimeoutMs))) c.client.disconnect();
    }
  }

  /** See {@link LockBackend.probe}: the server, or every Cluster master. */
  probe(timeoutMs?: number): Promise<LockBackendHealth> {
    return probeRedisBackend(this.context, timeoutMs);
  }

  /**
   * Sizes of the backend's bookkeeping, by name (waiters, holds, timers,
   * calls under way, connection listeners...), for leak checks in tests and
   * soaks. The names may change between versions.
   */
  bookkeeping(): Readonly<Record<string, number>> {
    return this.context.bookkeeping();
  }

  private open(): LockContext {
    if (this.context.closed) throw closedError();
    return this.context;
  }
}

function closedError(): LockBackendError {
  return new LockBackendError('The lock backend is closed');
}
