import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from '../lock-backend.js';
import {
  isFresh,
  leaseDeadline,
  monotonicNow,
} from '../../lease/lease-clock.js';
import { TrackedCalls, withDeadline } from './tracked-calls.js';
import { bypassKey, fenceKey, handoffId, queueKey } from './lock-keys.js';
import { busy, parseAcquireReply, type AcquireReply } from './lock-replies.js';
import { LocalHolds, type LocalHold, type PassStreak } from './local-holds.js';
import { TimedMemory } from './timed-memory.js';
import { WakeListener } from './wake-listener.js';
import { defineLockScripts, type LockScriptCommands } from './lock-scripts.js';

/** Options of {@link RedisLockBackend}. */
export interface RedisLockBackendOptions {
  /** The connection that runs the lock scripts. */
  readonly client: Redis;
  /** Close `client` in {@link RedisLockBackend.close}. Default false. */
  readonly ownsClient?: boolean;
  /** Longest time one Redis call may take before it fails with `LockBackendError`. Default 2000 ms. */
  readonly commandTimeoutMs?: number;
  /**
   * Lease given to a queued waiter when the lock is handed to it, before its
   * own lease is applied. Bounds how long a waiter that died in the queue can
   * hold up the others. Default 3000 ms.
   */
  readonly handoffLeaseMs?: number;
  /**
   * How many times in a row a released lock may go to a waiter in this
   * process ahead of an older waiter elsewhere (see the module option
   * `localHandoffs`). Default 8; 0 is strictly first come, first served.
   */
  readonly localHandoffs?: number;
  /** How long from the first pass the oldest waiter may be passed over, in ms. Default 2. */
  readonly localHandoffWindowMs?: number;
  /** Prefix of this backend's own bookkeeping keys (the wake list). Default `'lock:'`. */
  readonly keyPrefix?: string;
}

const defaults = {
  commandTimeoutMs: 2000,
  handoffLeaseMs: 3000,
  localHandoffs: 8,
  localHandoffWindowMs: 2,
  keyPrefix: 'lock:',
};

/** A hand-off message for a waiter that already took the lock is ignored for this long. */
const claimedMemoryMs = 60_000;
/** After finding a key busy, acquisitions of it go straight to the queueing script for this long. */
const contendedMemoryMs = 1000;

interface Waiter {
  /** {@link handoffId} of its key and token. */
  readonly id: string;
  readonly key: string;
  readonly token: string;
  readonly leaseMs: number;
  /** When the acquisition began (ms since epoch). */
  readonly startedAt: number;
  /** When the acquisition began, on the monotonic clock: grants' leases count from here. */
  readonly calledAt: number;
  /**
   * When the command that first queued it (or, while it waits only here, the
   * acquisition) was sent, on the monotonic clock: no lock was handed to it
   * earlier, so a hand-off's lease counts from here.
   */
  readonly queuedAt: number;
  readonly deadline: number;
  /**
   * Its entry in the key's queue in Redis; undefined while it waits only here,
   * behind a lock this process holds (see {@link RedisLockBackend.acquire}).
   */
  entry?: string;
  cancelling: boolean;
  /** A hand-off reached it while it was giving up (the cancel script then decides). */
  handedOver: boolean;
  /** Its grant may have lapsed and is being confirmed with Redis (see {@link RedisLockBackend.grant}). */
  confirming: boolean;
  /** How the wait ended; undefined while waiting. */
  outcome?: 'acquired' | 'not-acquired';
  timer?: NodeJS.Timeout;
  readonly signal?: AbortSignal;
  readonly onAbort: () => void;
  readonly resolve: (result: LockGrant | LockBusy) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * When an acquisition began: by the time of day, which its wait counts from,
 * and on the monotonic clock, which the leases it is granted count from.
 */
interface Started {
  readonly at: number;
  readonly calledAt: number;
}

/**
 * Lock store on one Redis server (standalone or behind Sentinel).
 *
 * A key this process has not found busy lately is first tried with a bare
 * `SET NX PX`, the cheapest command that can take a lock. It cannot jump the
 * queue: a release hands the lock to the next waiter in the same step, so a
 * lock with waiters is never free, but for one whose holder died unreleased,
 * which a newcomer may take before the queue's safety check hands it on (the
 * waiters are then served at its release). Such a grant carries no fencing
 * token; {@link fence} issues one when the holder asks.
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
 * uses for whoever holds it here (see {@link release}). A per-key safety check
 * (at most every `handoffLeaseMs`) covers a holder that dies without
 * releasing.
 */
export class RedisLockBackend implements LockBackend {
  private readonly client: Redis;
  private readonly scripts: LockScriptCommands;
  private readonly commandTimeoutMs: number;
  /** Every Redis call, bounded, and the work under way that close() waits for. */
  private readonly calls: TrackedCalls;
  private readonly handoffLeaseMs: number;
  private readonly localHandoffs: number;
  private readonly localHandoffWindowMs: number;
  private readonly ownsClient: boolean;
  /** Pops the hand-offs pushed to this process. */
  private readonly listener: WakeListener;

  private readonly waiters = new Map<string, Waiter>();
  private readonly waitersByKey = new Map<string, Set<Waiter>>();
  private readonly acquiring = new Set<string>();
  private readonly earlyHandoffs = new Map<string, number>();
  /** Waiters that took a lock whose hand-off message may still come, until when (ms since epoch). */
  private readonly claimed = new TimedMemory(claimedMemoryMs);
  /** Keys found busy lately, until when that counts (ms since epoch). */
  private readonly contended = new TimedMemory(contendedMemoryMs);
  private readonly checkTimers = new Map<string, NodeJS.Timeout>();
  /** Contended locks held here, by key. */
  private readonly holds = new LocalHolds();
  /** Times the client's connection closed: see {@link resent}. */
  private connectionDrops = 0;
  private closed = false;

  constructor(options: RedisLockBackendOptions) {
    this.client = options.client;
    this.ownsClient = options.ownsClient ?? false;
    this.commandTimeoutMs =
      options.commandTimeoutMs ?? defaults.commandTimeoutMs;
    this.handoffLeaseMs = options.handoffLeaseMs ?? defaults.handoffLeaseMs;
    this.localHandoffs = options.localHandoffs ?? defaults.localHandoffs;
    this.localHandoffWindowMs =
      options.localHandoffWindowMs ?? defaults.localHandoffWindowMs;
    this.calls = new TrackedCalls(this.commandTimeoutMs);
    this.scripts = defineLockScripts(this.client);
    this.listener = new WakeListener({
      client: this.client,
      keyPrefix: options.keyPrefix ?? defaults.keyPrefix,
      commandTimeoutMs: this.commandTimeoutMs,
      needed: () => this.waiters.size > 0 || this.acquiring.size > 0,
      onHandoff: (token, fencingToken, key) =>
        this.deliver(token, fencingToken, key),
    });
    this.client.on('close', this.countConnectionDrop);
  }

  /**
   * Takes the lock, or waits for it. A caller that finds the lock held by
   * another caller in this process, which will pass it on in memory (see
   * {@link release}), waits for that here without queueing in Redis: it
   * enters the queue there only if the lock goes elsewhere first, or at the
   * next safety check.
   */
  acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    if (this.closed) return Promise.reject(closedError());
    const started: Started = { at: Date.now(), calledAt: monotonicNow() };
    if (this.holds.size > 0 && this.passesInMemory) {
      const hold = this.holds.get(request.key);
      if (hold && this.mayWaitBehind(hold, request, started.calledAt))
        return this.waitBehind(request, hold, started);
    }
    if (this.isContended(request.key))
      return this.acquireContended(request, started);
    return this.take(request, started);
  }

  private mayWaitBehind(
    hold: LocalHold,
    request: AcquireRequest,
    now: number,
  ): boolean {
    return (
      request.waitMs > 0 &&
      !request.signal?.aborted &&
      hold.expiresAt > now &&
      hold.holder !== request.token &&
      hold.storedAs !== request.token
    );
  }

  private waitBehind(
    request: AcquireRequest,
    hold: LocalHold,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const deadline = started.at + Math.floor(request.waitMs);
    return this.wait(
      request,
      undefined,
      started,
      started.calledAt,
      deadline,
      hold.expiresAt - started.calledAt,
    );
  }

  /**
   * The uncontended path: one `SET NX PX`; a busy key goes on to the queueing
   * script. The answer is handled inside {@link call} rather than in an async
   * function: with an `AsyncLocalStorage` in use (as `@DistributedLock` has
   * it), every promise and every await costs a hook call, and this runs on
   * every acquisition.
   */
  private take(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    return this.calls.call(
      this.client.set(key, token, 'PX', Math.ceil(leaseMs), 'NX'),
      'acquire',
      (late) => {
        if (late === 'OK') this.giveBack(key, token);
      },
      (reply): LockGrant | LockBusy | Promise<LockGrant | LockBusy> => {
        // Busy, or already ours: a reconnect re-sent this SET after the first
        // one took the lock, and acquire.lua answers that as taken.
        if (reply !== 'OK') {
          this.rememberContended(key);
          return this.acquireContended(request, started);
        }
        if (this.closed) {
          this.giveBack(key, token);
          return { acquired: false };
        }
        if (isFresh(leaseDeadline(started.calledAt, leaseMs), leaseMs))
          return { acquired: true, leaseMs };
        return this.confirmTaken(request, started, undefined);
      },
    );
  }

  private async acquireContended(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    this.calls.begin();
    try {
      return await this.acquireOrWait(request, started);
    } finally {
      this.calls.end();
    }
  }

  private async acquireOrWait(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    const id = handoffId(key, token);
    const deadline = started.at + Math.max(0, Math.floor(request.waitMs));
    // What is left of the wait after the bare SET found the key busy.
    const waitMs = request.signal?.aborted
      ? 0
      : Math.max(0, deadline - Date.now());

    this.acquiring.add(id);
    const sentAt = monotonicNow();
    let reply: AcquireReply;
    try {
      reply = parseAcquireReply(
        await this.calls.call(
          this.acquireScript(key, token, leaseMs, waitMs),
          'acquire',
          (late) => this.undoAcquire(key, token, parseAcquireReply(late)),
        ),
      );
    } catch (error) {
      this.forgetEarlyHandoff(key, token);
      throw error;
    } finally {
      this.acquiring.delete(id);
    }

    if (this.closed) {
      // close() has sent the waiters away already: neither hold nor wait now.
      this.forgetEarlyHandoff(key, token);
      this.undoAcquire(key, token, reply);
      return { acquired: false };
    }
    if (reply[0] === 1) {
      // Not queued, so no hand-off was meant for this acquisition.
      this.forgetEarlyHandoff(key, token);
      const fencingToken = Number(reply[1]);
      if (!isFresh(leaseDeadline(sentAt, leaseMs), leaseMs))
        return this.confirmTaken(request, started, fencingToken);
      this.holdLocally(key, token, sentAt + leaseMs);
      return {
        acquired: true,
        fencingToken,
        leaseMs: sentAt + leaseMs - started.calledAt,
      };
    }
    const [, pttl, entry] = reply;
    this.rememberContended(key);
    if (entry === undefined) {
      this.forgetEarlyHandoff(key, token);
      return busy(pttl);
    }
    return this.wait(request, entry, started, sentAt, deadline, Number(pttl));
  }

  /**
   * The answer that granted the lock came so late (a paused process, a slow
   * event loop) that its lease may have lapsed: the caller must not run on
   * it. Sets the full lease if the lock is still ours, counted from now; if it
   * is not, tries again within what is left of the wait.
   */
  /**
   * Sets `leaseMs` on `key` if `token` (the token it is stored under) still
   * holds it, to confirm a grant that may have lapsed. Resolves when that
   * command was sent (monotonic) if it did, undefined if the lock has moved
   * on. A confirmation that fails, or answers after the caller gave up, would
   * leave the lock held by nobody: it is given back.
   */
  private async confirmLease(
    key: string,
    token: string,
    leaseMs: number,
  ): Promise<number | undefined> {
    const sentAt = monotonicNow();
    let reply: unknown;
    try {
      reply = await this.calls.call(
        this.scripts.lockExtend(key, token, Math.ceil(leaseMs)),
        'acquire',
        (late) => {
          if (Number(late) === 1) this.giveBack(key, token);
        },
      );
    } catch (error) {
      this.giveBack(key, token);
      throw error;
    }
    return Number(reply) === 1 ? sentAt : undefined;
  }

  /** Whether `waiter`'s wait ran out or was aborted. */
  private isDue(waiter: Waiter): boolean {
    return waiter.deadline <= Date.now() || waiter.signal?.aborted === true;
  }

  /**
   * `waiter` waits on after a confirmation found its grant lapsed, or a pass
   * found the lock lost: it gives up now if its time ran out meanwhile (its
   * timer found it busy), and otherwise is checked on and listened for.
   */
  private waitOn(waiter: Waiter): void {
    if (this.waiters.get(waiter.id) !== waiter) return;
    if (this.isDue(waiter)) {
      void this.calls.track(this.giveUp(waiter));
      return;
    }
    this.scheduleCheck(waiter.key, this.handoffLeaseMs);
    this.listener.listen();
  }

  private async confirmTaken(
    request: AcquireRequest,
    started: Started,
    fencingToken: number | undefined,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    const sentAt = await this.confirmLease(key, token, leaseMs);
    if (sentAt === undefined) return this.acquireContended(request, started);
    if (this.closed) {
      this.giveBack(key, token);
      return { acquired: false };
    }
    if (fencingToken !== undefined)
      this.holdLocally(key, token, sentAt + leaseMs);
    return {
      acquired: true,
      fencingToken,
      leaseMs: sentAt + leaseMs - started.calledAt,
    };
  }
  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.assertOpen();
    const hold = this.holds.of(key, token);
    // Passed on to another holder here: no longer this token's to extend.
    if (hold && hold.holder !== token) return false;
    const sentAt = monotonicNow();
    const result = await this.calls.call(
      this.scripts.lockExtend(key, hold?.storedAs ?? token, Math.ceil(leaseMs)),
      'extend',
    );
    const owned = Number(result) === 1;
    if (hold && this.holds.get(key) === hold && hold.holder === token) {
      if (owned) hold.expiresAt = sentAt + leaseMs;
      else this.dropHold(key);
    }
    return owned;
  }

  /**
   * Frees `key`, handing it to the next waiter. A lock this process holds
   * under contention goes to the oldest waiter for it in this process when
   * there is one, in memory and at once: no round trip to Redis stands
   * between the two holders. That pass-over of any older waiter elsewhere
   * counts against the same bound as release.lua's local hand-offs
   * (`localHandoffs` in a row, within `localHandoffWindowMs`), and Redis is
   * told of it afterwards (pass-on.lua), which is what the release answers.
   */
  release(key: string, token: string): Promise<boolean> {
    if (this.closed) return Promise.reject(closedError());
    const hold = this.holds.of(key, token);
    if (hold) return this.releaseHeld(key, token, hold);
    if (this.isContended(key)) return this.runRelease(key, token);
    return this.releaseUnqueued(key, token);
  }

  private releaseHeld(
    key: string,
    token: string,
    hold: LocalHold,
  ): Promise<boolean> {
    // Passed on already (or being passed on): a second release of the same hold.
    if (hold.holder !== token) return Promise.resolve(false);
    const now = Date.now();
    const mono = monotonicNow();
    const next = this.mayPassOver(hold, mono)
      ? this.oldestLocalWaiter(key, now)
      : undefined;
    if (next) {
      const leaseMs = this.handoffLease(next);
      // A lease about to end is not passed on: its new holder would have to
      // renew it at once, a round trip as long as a release's.
      if (hold.expiresAt - mono >= leaseMs / 2)
        return this.passOn(key, hold, next, leaseMs, mono);
    }
    this.holds.delete(key);
    return this.releaseToQueue(key, hold, mono);
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
  ): Promise<boolean> {
    const successor = this.oldestLocalWaiter(key, Date.now(), 'unqueued');
    try {
      const released = await this.runRelease(
        key,
        hold.storedAs,
        undefined,
        {
          passes: hold.passesInMemory,
          sinceFirstMs: hold.passes > 0 ? mono - hold.firstPassAt : 0,
        },
        successor,
      );
      if (!this.holds.has(key)) this.queueWaitersBehind(key);
      return released;
    } catch (error) {
      this.failWaitersBehind(key, error);
      throw error;
    }
  }

  /** Those who waited here for the lock this process held, and not in Redis's queue. */
  private waitersBehind(key: string): Waiter[] {
    const waiting = this.waitersByKey.get(key);
    if (!waiting) return [];
    return [...waiting].filter((waiter) => waiter.entry === undefined);
  }

  /** The lock held here is gone: those who waited for it here queue in Redis. */
  private queueWaitersBehind(key: string): void {
    const unqueued = this.waitersBehind(key);
    if (unqueued.length > 0)
      // On failure the next safety check tries again.
      void this.calls.track(this.requeue(key, unqueued).catch(() => undefined));
  }

  /** Redis did not confirm where the lock held here went: its waiters here fail with that error. */
  private failWaitersBehind(key: string, error: unknown): void {
    for (const waiter of this.waitersBehind(key)) {
      if (!waiter.confirming) this.settle(waiter, error as Error);
    }
  }

  /** Forgets a hold found lost, sending its local waiters to the queue. */
  private dropHold(key: string): void {
    this.holds.delete(key);
    this.queueWaitersBehind(key);
  }

  /** The lease a lock handed to `waiter` gets, until the waiter sets its own. */
  private handoffLease(waiter: Waiter): number {
    return Math.min(waiter.leaseMs, this.handoffLeaseMs);
  }

  /** Whether local hand-offs may pass over the queue's head at all. */
  private get passesInMemory(): boolean {
    return this.localHandoffs > 0 && this.localHandoffWindowMs > 0;
  }

  /** Whether the next hand-off may pass over the queue's head once more (`mono`: monotonic now). */
  private mayPassOver(hold: LocalHold, mono: number): boolean {
    return (
      this.passesInMemory &&
      hold.passes < this.localHandoffs &&
      (hold.passes === 0 || mono - hold.firstPassAt < this.localHandoffWindowMs)
    );
  }

  /** The longest-waiting waiter for `key` here that can take a lock now. */
  private oldestLocalWaiter(
    key: string,
    now: number,
    only?: 'unqueued',
  ): Waiter | undefined {
    for (const waiter of this.waitersByKey.get(key) ?? []) {
      if (
        (only === undefined || waiter.entry === undefined) &&
        !waiter.cancelling &&
        !waiter.confirming &&
        waiter.deadline >= now &&
        !waiter.signal?.aborted &&
        // Being queued again (see requeue): its new entry is not known yet.
        !this.acquiring.has(waiter.id)
      )
        return waiter;
    }
    return undefined;
  }

  /**
   * Gives the held lock to `next`, a waiter of this process, without a trip
   * through the queue: pass-on.lua sets the new holder's lease on the lock,
   * which stays stored under its first token here. The new holder runs only
   * once Redis has confirmed that: a lock lost meanwhile (Redis restarted
   * empty, the key deleted) is never passed on. Resolves with whether it was
   * still ours to give; rejects, and fails the waiters here, when Redis does
   * not answer.
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
    return this.calls
      .call(
        this.scripts.lockPassOn(
          key,
          queueKey(key),
          bypassKey(key),
          hold.storedAs,
          // A waiter that was not queued in Redis has no entry to take out.
          next.entry ?? '',
          Math.ceil(leaseMs),
        ),
        'release',
        // Passed after we gave up on it: nobody here holds it now.
        (late) => {
          if (Number(late) === 1) this.giveBack(key, hold.storedAs);
        },
        (reply) => {
          if (Number(reply) !== 1) {
            // Lost before it was passed on: its place in Redis's queue was kept.
            this.passLost(key, hold, next);
            return false;
          }
          // Its entry left the queue with the pass.
          next.entry = undefined;
          hold.holder = next.token;
          hold.expiresAt = sentAt + leaseMs;
          if (isFresh(leaseDeadline(sentAt, leaseMs), leaseMs)) {
            next.confirming = false;
            this.takePass(key, hold, next, sentAt + leaseMs);
          } else {
            // Answered so late that the new lease may have lapsed already.
            void this.calls.track(this.confirmPass(key, hold, next));
          }
          return true;
        },
      )
      .catch((error: unknown) => {
        this.passFailed(key, hold, next, error);
        throw error;
      });
  }

  /** The lock was lost before it could be passed: `next` and the others here queue in Redis. */
  private passLost(key: string, hold: LocalHold, next: Waiter): void {
    next.confirming = false;
    if (this.holds.get(key) === hold) this.dropHold(key);
    this.waitOn(next);
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
    if (this.holds.get(key) === hold) this.holds.delete(key);
    this.failWaitersBehind(key, error);
    this.waitOn(next);
  }

  /** `next` runs with the lock passed to it, surely held until `expiresAt` (monotonic). */
  private takePass(
    key: string,
    hold: LocalHold,
    next: Waiter,
    expiresAt: number,
  ): void {
    const granted = this.settle(next, {
      acquired: true,
      leaseMs: expiresAt - next.calledAt,
    });
    if (granted) return;
    // `next` left (closing) while Redis answered: pass the lock on, or give
    // it back when this backend is closing.
    if (!this.closed) {
      void this.release(key, next.token).catch(() => false);
      return;
    }
    this.holds.delete(key);
    this.giveBack(key, hold.storedAs);
  }

  /** A pass confirmed late: sets `next`'s full lease if the lock is still held here, before it runs. */
  private async confirmPass(
    key: string,
    hold: LocalHold,
    next: Waiter,
  ): Promise<void> {
    let sentAt: number | undefined;
    try {
      sentAt = await this.confirmLease(key, hold.storedAs, next.leaseMs);
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
    this.takePass(key, hold, next, sentAt + next.leaseMs);
  }

  /** Remembers that `token` holds `key` under contention, so that it may pass it on here. */
  private holdLocally(
    key: string,
    token: string,
    expiresAt: number,
    streak?: PassStreak,
  ): void {
    if (!this.closed) this.holds.record(key, token, expiresAt, streak);
  }

  /**
   * The uncontended path: a compare-and-delete that declines when anyone
   * queues, and then the full release, which serves the queue.
   */
  private releaseUnqueued(key: string, token: string): Promise<boolean> {
    const drops = this.connectionDrops;
    return this.calls.call(
      this.scripts.lockReleaseUnqueued(key, queueKey(key), token),
      'release',
      // Declined after all, for a queue: serve it, as a release that had
      // answered in time would have.
      (late) => {
        if (Number(late) === -1) this.giveBack(key, token);
      },
      (reply) => {
        const result = Number(reply);
        if (result !== -1) return result === 1 || this.resent(drops);
        this.rememberContended(key);
        return this.runRelease(key, token);
      },
    );
  }

  async fence(key: string, token: string): Promise<number | undefined> {
    this.assertOpen();
    const hold = this.holds.of(key, token);
    if (hold && hold.holder !== token) return undefined;
    const fence = await this.calls.call(
      this.scripts.lockFence(key, fenceKey(key), hold?.storedAs ?? token),
      'fence',
    );
    if (fence !== null) return Number(fence);
    if (hold && this.holds.get(key) === hold && hold.holder === token)
      this.dropHold(key);
    return undefined;
  }

  async isLocked(key: string): Promise<boolean> {
    this.assertOpen();
    return (
      Number(await this.calls.call(this.client.exists(key), 'exists')) === 1
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.checkTimers.values()) clearTimeout(timer);
    this.checkTimers.clear();
    this.contended.clear();
    this.holds.clear();
    for (const waiter of this.waiters.values()) {
      this.settle(waiter, { acquired: false });
      if (waiter.entry === undefined) continue;
      // Leave the queue so nobody hands a lock to a process that is going
      // away; a lock handed to the waiter meanwhile is given back.
      void this.calls.track(
        this.cancelEntry(waiter.key, waiter.token, waiter.entry)
          .then((outcome) => {
            if (outcome.claimed)
              this.grant(
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
    await this.calls.drain(2 * this.commandTimeoutMs);
    this.client.off('close', this.countConnectionDrop);
    this.listener.close();
    if (this.ownsClient) {
      // A Redis that stopped answering must not hold up the app's shutdown.
      const quit = this.client.quit().catch(() => undefined);
      if (!(await withDeadline(quit, this.commandTimeoutMs)))
        this.client.disconnect();
    }
  }

  /** The lock, its fencing counter and its wait queue. */
  private lockKeys(key: string): [string, string, string] {
    return [key, fenceKey(key), queueKey(key)];
  }

  /** {@link lockKeys} and the queue's pass-over record, for the scripts that serve the queue. */
  private queueKeys(key: string): [string, string, string, string] {
    return [key, fenceKey(key), queueKey(key), bypassKey(key)];
  }

  private wait(
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
        startedAt: started.at,
        calledAt: started.calledAt,
        queuedAt,
        deadline,
        entry,
        cancelling: false,
        handedOver: false,
        confirming: false,
        signal: request.signal,
        onAbort: () => void this.calls.track(this.giveUp(waiter)),
        resolve,
        reject,
      };
      this.waiters.set(waiter.id, waiter);
      let sameKey = this.waitersByKey.get(waiter.key);
      if (!sameKey) this.waitersByKey.set(waiter.key, (sameKey = new Set()));
      sameKey.add(waiter);
      waiter.timer = setTimeout(
        waiter.onAbort,
        Math.max(0, deadline - Date.now()),
      );
      request.signal?.addEventListener('abort', waiter.onAbort, { once: true });

      const early = this.earlyHandoffs.get(waiter.id);
      if (early !== undefined) {
        this.earlyHandoffs.delete(waiter.id);
        this.grant(waiter, early, queuedAt, this.handoffLease(waiter));
        // Granted; or being confirmed, after which it may wait on.
        if (this.waiters.get(waiter.id) !== waiter) return;
      }
      if (request.signal?.aborted) {
        // Aborted while the acquisition was on its way, before the listener
        // was added: an 'abort' event will not come again.
        waiter.onAbort();
      } else {
        this.scheduleCheck(waiter.key, holderPttl);
      }
      this.listener.listen();
    });
  }

  /**
   * Gives `waiter` the lock handed to it, whose lease of `leaseMs` was set no
   * earlier than `setAfter` (monotonic ms). A grant that may have lapsed by
   * now (the process was paused, its wake-up read late) never reaches the
   * waiter as it is: it is confirmed with Redis first (see
   * {@link confirmGrant}). Returns false when the waiter had already settled
   * or is being confirmed; if it left without the lock, the lock is given
   * back.
   */
  private grant(
    waiter: Waiter,
    fencingToken: number | undefined,
    setAfter: number,
    leaseMs: number,
    streak?: PassStreak,
  ): boolean {
    if (this.waiters.get(waiter.id) !== waiter || waiter.confirming) {
      if (waiter.outcome === 'not-acquired')
        this.giveBack(waiter.key, waiter.token, fencingToken);
      return false;
    }
    if (!isFresh(leaseDeadline(setAfter, leaseMs), leaseMs)) {
      waiter.confirming = true;
      void this.calls.track(this.confirmGrant(waiter, fencingToken, streak));
      return true;
    }
    this.settle(waiter, {
      acquired: true,
      fencingToken,
      leaseMs: setAfter + leaseMs - waiter.calledAt,
    });
    this.holdLocally(waiter.key, waiter.token, setAfter + leaseMs, streak);
    return true;
  }

  /**
   * A grant that may have lapsed: sets the waiter's full lease if its token
   * still holds the lock, counted from now, and only then lets it run. If the
   * lock has moved on (its lease ran out while this process was paused, and
   * another took it), the waiter queues again within what is left of its
   * wait.
   */
  private async confirmGrant(
    waiter: Waiter,
    fencingToken: number | undefined,
    streak: PassStreak | undefined,
  ): Promise<void> {
    const { key, token, leaseMs } = waiter;
    let sentAt: number | undefined;
    try {
      sentAt = await this.confirmLease(key, token, leaseMs);
    } catch (error) {
      waiter.confirming = false;
      this.settle(waiter, error as Error);
      return;
    }
    waiter.confirming = false;
    if (sentAt !== undefined) {
      const granted = this.settle(waiter, {
        acquired: true,
        fencingToken,
        leaseMs: sentAt + leaseMs - waiter.calledAt,
      });
      if (granted) this.holdLocally(key, token, sentAt + leaseMs, streak);
      else this.giveBack(key, token);
      return;
    }
    // The lapsed grant took its entry out of the queue.
    waiter.entry = undefined;
    // Giving up already (the grant came to its cancel), or its time ran out
    // while it was being confirmed: there is nothing left to leave.
    if (waiter.cancelling || this.isDue(waiter)) {
      this.settle(waiter, busy(0));
      return;
    }
    try {
      await this.requeueOne(key, waiter);
    } catch (error) {
      this.settle(waiter, error as Error);
      return;
    }
    this.waitOn(waiter);
  }

  private settle(
    waiter: Waiter,
    result: LockGrant | LockBusy | Error,
  ): boolean {
    if (this.waiters.get(waiter.id) !== waiter) return false;
    this.waiters.delete(waiter.id);
    waiter.outcome =
      !(result instanceof Error) && result.acquired
        ? 'acquired'
        : 'not-acquired';
    clearTimeout(waiter.timer);
    waiter.signal?.removeEventListener('abort', waiter.onAbort);
    const sameKey = this.waitersByKey.get(waiter.key);
    sameKey?.delete(waiter);
    if (sameKey?.size === 0) {
      this.waitersByKey.delete(waiter.key);
      clearTimeout(this.checkTimers.get(waiter.key));
      this.checkTimers.delete(waiter.key);
    }
    if (result instanceof Error) waiter.reject(result);
    else waiter.resolve(result);
    return true;
  }

  /** The wait ran out or was aborted: leave the queue, unless the lock arrived meanwhile. */
  private async giveUp(waiter: Waiter): Promise<void> {
    if (
      waiter.cancelling ||
      // Its grant is being confirmed, which settles it either way.
      waiter.confirming ||
      this.waiters.get(waiter.id) !== waiter
    )
      return;
    waiter.cancelling = true;
    if (waiter.entry === undefined) {
      // Not queued in Redis (if a requeue is on its way, it gives back what
      // it gets for a waiter that left).
      const hold = this.holds.get(waiter.key);
      this.settle(waiter, busy(hold ? hold.expiresAt - monotonicNow() : 0));
      return;
    }
    try {
      let entry: string;
      let outcome: Awaited<ReturnType<typeof this.cancelEntry>>;
      do {
        // Queued again (by a check) while the cancel was on its way: leave
        // with the new entry too.
        entry = waiter.entry;
        outcome = await this.cancelEntry(waiter.key, waiter.token, entry);
      } while (!outcome.claimed && waiter.entry !== entry);
      if (outcome.claimed) {
        const granted = this.grant(
          waiter,
          outcome.fencingToken,
          outcome.sentAt,
          outcome.leaseMs,
        );
        // Its hand-off message may still be on its way: ignore it then.
        if (granted && !waiter.handedOver) this.rememberClaimed(waiter.id);
      } else {
        this.settle(waiter, busy(outcome.holderPttl));
      }
    } catch (error) {
      this.settle(waiter, error as Error);
    }
  }

  private async cancelEntry(
    key: string,
    token: string,
    entry: string,
  ): Promise<
    | { claimed: true; fencingToken: number; sentAt: number; leaseMs: number }
    | { claimed: false; holderPttl: number }
  > {
    const sentAt = monotonicNow();
    const reply = (await this.calls.call(
      this.scripts.lockCancel(...this.queueKeys(key), token, entry),
      'cancel',
      // It kept a lock it was handed, but nobody heard: nobody holds it.
      (late) => {
        const [kept, fencingToken] = late as [number, number];
        if (kept === 1) this.giveBack(key, token, Number(fencingToken));
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

  /**
   * A lock was handed to `token`: wake its waiter, or pass the lock on if
   * nobody here wants it. The hand-off's lease was set after the waiter
   * queued, and after `sentAt` (monotonic) when the answer of a command sent
   * then brought it.
   */
  private deliver(
    token: string,
    fencingToken: number,
    key: string,
    sentAt?: number,
    streak?: PassStreak,
  ): void {
    const id = handoffId(key, token);
    const waiter = this.waiters.get(id);
    if (waiter) {
      // While giving up, the cancel script decides who keeps the lock.
      if (waiter.cancelling) waiter.handedOver = true;
      else
        this.grant(
          waiter,
          fencingToken,
          Math.max(waiter.queuedAt, sentAt ?? -Infinity),
          this.handoffLease(waiter),
          streak,
        );
    } else if (this.claimed.delete(id)) {
      // The waiter already took this lock (giving up, or on a check).
    } else if (this.acquiring.has(id)) {
      this.earlyHandoffs.set(id, fencingToken);
    } else {
      // Nobody here wants this lock any more: pass it on at once.
      this.giveBack(key, token, fencingToken);
    }
  }

  private forgetEarlyHandoff(key: string, token: string): void {
    if (this.earlyHandoffs.size === 0) return;
    const id = handoffId(key, token);
    const fencingToken = this.earlyHandoffs.get(id);
    if (fencingToken !== undefined) {
      this.earlyHandoffs.delete(id);
      this.giveBack(key, token, fencingToken);
    }
  }

  /** An acquisition nobody waits for any more was applied: give back what it got. */
  private undoAcquire(key: string, token: string, reply: AcquireReply): void {
    if (reply[0] === 1) {
      this.giveBack(key, token, Number(reply[1]));
    } else if (reply[2] !== undefined) {
      void this.calls.track(
        this.cancelEntry(key, token, reply[2])
          .then((outcome) => {
            if (outcome.claimed)
              this.giveBack(key, token, outcome.fencingToken);
          })
          .catch(() => undefined),
      );
    }
  }

  /**
   * Frees `key` for the next waiter if `token` still holds it (by the grant
   * `fencingToken`, when given): nobody here wants that lock. Works while
   * closing, never throws.
   */
  private giveBack(key: string, token: string, fencingToken?: number): void {
    void this.runRelease(key, token, fencingToken).catch(() => false);
  }

  private async runRelease(
    key: string,
    token: string,
    fencingToken?: number,
    passedInMemory?: PassStreak,
    successor?: Waiter,
  ): Promise<boolean> {
    this.calls.begin();
    const drops = this.connectionDrops;
    const sentAt = monotonicNow();
    try {
      const result = await this.calls.call(
        this.releaseScript(key, token, fencingToken, passedInMemory, successor),
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
      this.calls.end();
    }
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
      this.deliver(nextToken, Number(fencingToken), key, sentAt, streak);
      return true;
    }
    return Number(result) === 1;
  }

  /** Whether `key` should skip the bare `SET`: someone here waits for it, or it was busy lately. */
  private isContended(key: string): boolean {
    // Nobody here waits and no key was busy lately: the common case, answered
    // without hashing the key (a string built for this acquisition).
    if (this.waitersByKey.size === 0 && this.contended.size === 0) return false;
    return this.waitersByKey.has(key) || this.contended.has(key);
  }

  private rememberContended(key: string): void {
    this.contended.remember(key);
  }

  private rememberClaimed(id: string): void {
    this.claimed.remember(id);
  }

  /**
   * Safety net for a holder that died without releasing: while anyone here
   * waits for `key`, check it when the holder's lease should have ended, and at
   * least every `handoffLeaseMs`.
   */
  private scheduleCheck(key: string, holderPttl: number): void {
    if (this.checkTimers.has(key) || this.closed) return;
    const delay =
      holderPttl > 0
        ? Math.min(holderPttl + 1, this.handoffLeaseMs)
        : this.handoffLeaseMs;
    const timer: NodeJS.Timeout = setTimeout(
      () => void this.calls.track(this.check(key, timer)),
      delay,
    );
    timer.unref();
    this.checkTimers.set(key, timer);
  }

  private async check(key: string, timer: NodeJS.Timeout): Promise<void> {
    // The fired timer keeps this key's slot, so no second check runs alongside.
    const waiting: Waiter[] = [];
    const missing: Waiter[] = [];
    const hold = this.holds.get(key);
    const held = hold !== undefined && hold.expiresAt > monotonicNow();
    for (const waiter of this.waitersByKey.get(key) ?? []) {
      if (waiter.cancelling || waiter.confirming) continue;
      if (waiter.entry !== undefined) waiting.push(waiter);
      // Waiting here for a hold that ended without a pass (its lease ran out).
      else if (!held) missing.push(waiter);
    }
    let pttl = held ? hold.expiresAt - monotonicNow() : this.handoffLeaseMs;
    try {
      if (waiting.length > 0 && !this.closed) {
        const sentAt = monotonicNow();
        const [remaining, fencingToken, states] = (await this.calls.call(
          this.scripts.lockKick(
            ...this.lockKeys(key),
            ...waiting.map((waiter) => waiter.entry ?? ''),
          ),
          'check',
        )) as [number, number, string];
        pttl = Number(remaining);
        for (const [index, waiter] of waiting.entries()) {
          if (states[index] === 'h') {
            // Handed over, but its wake-up was lost (or is still on its way).
            // The lease left is the lock's own, counted from the check.
            if (this.grant(waiter, Number(fencingToken), sentAt, pttl))
              this.rememberClaimed(waiter.id);
          } else if (states[index] === 'm') {
            missing.push(waiter);
          }
        }
      }
      await this.requeue(key, missing);
    } catch {
      // Redis is away; look again later.
    }
    if (this.checkTimers.get(key) !== timer) return;
    this.checkTimers.delete(key);
    if (this.waitersByKey.has(key)) this.scheduleCheck(key, pttl);
  }

  /**
   * Queues again, in their original order, waiters whose entries vanished
   * (Redis restarted, the queue aged out, a hand-off to them lapsed unseen),
   * and queues those that waited here for a lock that is no longer held here.
   */
  private async requeue(key: string, waiters: Waiter[]): Promise<void> {
    // Sent together: one connection keeps them in order.
    await Promise.all(waiters.map((waiter) => this.requeueOne(key, waiter)));
  }

  private async requeueOne(key: string, waiter: Waiter): Promise<void> {
    if (
      this.closed ||
      waiter.cancelling ||
      waiter.confirming ||
      this.waiters.get(waiter.id) !== waiter ||
      this.acquiring.has(waiter.id)
    )
      return;
    const remaining = waiter.deadline - Date.now();
    if (remaining <= 0) return;
    this.acquiring.add(waiter.id);
    const sentAt = monotonicNow();
    try {
      const reply = parseAcquireReply(
        await this.calls.call(
          this.acquireScript(key, waiter.token, waiter.leaseMs, remaining),
          'acquire',
          (late) =>
            this.undoAcquire(key, waiter.token, parseAcquireReply(late)),
        ),
      );
      if (reply[0] === 1) {
        this.grant(waiter, Number(reply[1]), sentAt, waiter.leaseMs);
      } else if (reply[2] !== undefined) {
        // queuedAt stays when it first queued: a late message about an
        // older entry must not look fresh.
        if (this.waiters.get(waiter.id) === waiter) waiter.entry = reply[2];
        else if (waiter.outcome === 'not-acquired')
          this.undoAcquire(key, waiter.token, reply);
      }
    } finally {
      this.acquiring.delete(waiter.id);
      const early = this.earlyHandoffs.get(waiter.id);
      if (early !== undefined) {
        this.earlyHandoffs.delete(waiter.id);
        this.grant(waiter, early, waiter.queuedAt, this.handoffLease(waiter));
      }
    }
  }

  // The two scripts of every lock cycle pass their keys one by one: spreading
  // lockKeys() here would build arrays per call on the hot path.

  /** Runs acquire.lua: take the lock, or queue for it when `waitMs` > 0. */
  private acquireScript(
    key: string,
    token: string,
    leaseMs: number,
    waitMs: number,
  ): Promise<unknown> {
    return this.scripts.lockAcquire(
      key,
      fenceKey(key),
      queueKey(key),
      token,
      Math.ceil(leaseMs),
      waitMs,
      this.listener.scriptName,
      this.handoffLeaseMs,
    );
  }

  /** Runs release.lua; with `fencingToken`, only while that grant is the current one. */
  private releaseScript(
    key: string,
    token: string,
    fencingToken: number | undefined,
    passedInMemory: PassStreak | undefined,
    successor: Waiter | undefined,
  ): Promise<unknown> {
    return this.scripts.lockRelease(
      key,
      fenceKey(key),
      queueKey(key),
      bypassKey(key),
      token,
      this.listener.scriptName,
      this.localHandoffs,
      this.localHandoffWindowMs,
      fencingToken ?? '',
      passedInMemory?.passes ?? 0,
      passedInMemory?.sinceFirstMs ?? 0,
      successor?.token ?? '',
      successor ? Math.ceil(this.handoffLease(successor)) : 0,
    );
  }

  private assertOpen(): void {
    if (this.closed) throw closedError();
  }
}

function closedError(): LockBackendError {
  return new LockBackendError('The lock backend is closed');
}
