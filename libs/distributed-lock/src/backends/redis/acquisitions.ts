import {
  isFresh,
  leaseDeadline,
  monotonicNow,
} from '../../lease/lease-clock.js';
import { sameSession } from '../../session/session-token.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import type { LocalHold } from './local-holds.js';
import type { LockContext } from './lock-context.js';
import { handoffId } from './lock-keys.js';
import { busy, parseAcquireReply, type AcquireReply } from './lock-replies.js';
import type { Started } from './waiter.js';

/**
 * Taking a lock: a bare `SET NX PX` for a key not found busy lately (or
 * acquire-fenced.lua, the same with a fencing token, when the caller wants it),
 * else acquire.lua, which takes the lock or queues the caller; a caller that
 * finds the lock held by another caller in this process waits here behind it.
 */
export class Acquisitions {
  constructor(private readonly c: LockContext) {}

  /**
   * A caller that finds the lock held by another caller in this process,
   * which will pass it on in memory (see `LocalPasses`), waits for that here
   * without queueing in Redis: it enters the queue there only if the lock
   * goes elsewhere first, or at the next safety check.
   */
  acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    const started: Started = { at: Date.now(), calledAt: monotonicNow() };
    if (this.c.holds.size > 0 && this.c.passes.passesInMemory) {
      const hold = this.c.holds.get(request.key);
      if (hold && this.mayWaitBehind(hold, request, started.calledAt))
        return this.waitBehind(request, hold, started);
    }
    if (this.c.isContended(request.key))
      return this.acquireContended(request, started);
    return this.take(request, started);
  }

  /** acquire.lua, counted as work under way (close() waits for what it may undo). */
  async acquireContended(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    this.c.calls.begin();
    try {
      return await this.acquireOrWait(request, started);
    } finally {
      this.c.calls.end();
    }
  }

  /**
   * The answer that granted the lock came so late (a paused process, a slow
   * event loop) that its lease may have lapsed: the caller must not run on
   * it. Sets the full lease if the lock is still ours, counted from now; if it
   * is not, tries again within what is left of the wait. A lock taken by the
   * queueing script (`contended`) is recorded as held here under contention.
   */
  async confirmTaken(
    request: AcquireRequest,
    started: Started,
    fencingToken: number | undefined,
    contended: boolean,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    const sentAt = await this.c.grants.confirmLease(key, token, leaseMs);
    if (sentAt === undefined) return this.acquireContended(request, started);
    if (this.c.closed) {
      this.c.releases.giveBack(key, token);
      return { acquired: false };
    }
    if (contended) this.c.grants.holdLocally(key, token, sentAt + leaseMs);
    return {
      acquired: true,
      fencingToken,
      leaseMs: sentAt + leaseMs - started.calledAt,
    };
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
      hold.storedAs !== request.token &&
      sameSession(hold.storedAs, request.token)
    );
  }

  private waitBehind(
    request: AcquireRequest,
    hold: LocalHold,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const deadline = started.at + Math.floor(request.waitMs);
    return this.c.waiting.wait(
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
   * script. The answer is handled inside `calls.call` rather than in an async
   * function: with an `AsyncLocalStorage` in use (as `@DistributedLock` has
   * it), every promise and every await costs a hook call, and this runs on
   * every acquisition.
   */
  private take(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    if (request.fence) return this.takeFenced(request, started);
    const { key, token, leaseMs } = request;
    return this.c.calls.call(
      this.c.client.set(key, token, 'PX', Math.ceil(leaseMs), 'NX'),
      'acquire',
      (late) => {
        if (late === 'OK') this.c.releases.giveBack(key, token);
      },
      (reply): LockGrant | LockBusy | Promise<LockGrant | LockBusy> => {
        // Busy, or already ours: a reconnect re-sent this SET after the first
        // one took the lock, and acquire.lua answers that as taken.
        if (reply !== 'OK') {
          this.c.contended.remember(key);
          return this.acquireContended(request, started);
        }
        if (this.c.closed) {
          this.c.releases.giveBack(key, token);
          return { acquired: false };
        }
        if (isFresh(leaseDeadline(started.calledAt, leaseMs), leaseMs))
          return { acquired: true, leaseMs };
        return this.confirmTaken(request, started, undefined, false);
      },
    );
  }

  /**
   * {@link take} for a caller that wants its fencing token: acquire-fenced.lua
   * takes a free lock and issues its token in the same step, still one round
   * trip. Its 0 (busy, or ours already after a re-send) goes on
   * to the queueing script, as a busy `SET` does.
   */
  private takeFenced(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    const { releases } = this.c;
    return this.c.calls.call(
      this.c.commands.acquireFenced(key, token, leaseMs),
      'acquire',
      (late) => {
        if (Number(late) > 0) releases.giveBack(key, token, Number(late));
      },
      (reply): LockGrant | LockBusy | Promise<LockGrant | LockBusy> => {
        const fencingToken = Number(reply);
        if (fencingToken === 0) {
          this.c.contended.remember(key);
          return this.acquireContended(request, started);
        }
        if (this.c.closed) {
          releases.giveBack(key, token, fencingToken);
          return { acquired: false };
        }
        if (isFresh(leaseDeadline(started.calledAt, leaseMs), leaseMs))
          return { acquired: true, fencingToken, leaseMs };
        return this.confirmTaken(request, started, fencingToken, false);
      },
    );
  }

  /**
   * Found busy, not queued (try-once): if the holder's process session is
   * gone, the lock is free. It is freed from that holder (and served to the
   * queue, if anyone waits) and tried once more.
   */
  private async unlessHolderDied(
    request: AcquireRequest,
    started: Started,
    holder: string,
    pttl: number,
  ): Promise<LockGrant | LockBusy> {
    const left = await this.c.holderSessions.left(holder, true);
    if (left !== 0) return busy(pttl);
    await this.c.calls.call(
      this.c.commands.kick(request.key, [], holder),
      'check',
    );
    return this.queue(
      request,
      { ...started, freedDeadHolder: true },
      started.at,
      0,
    );
  }

  private async acquireOrWait(
    request: AcquireRequest,
    started: Started,
  ): Promise<LockGrant | LockBusy> {
    const { key } = request;
    const deadline = started.at + Math.max(0, Math.floor(request.waitMs));
    // What is left of the wait after the bare SET found the key busy.
    const waitMs = request.signal?.aborted
      ? 0
      : Math.max(0, deadline - Date.now());

    const subscribing = waitMs > 0 ? this.c.wakeupsFor(key) : undefined;
    if (subscribing) await subscribing;
    try {
      return await this.queue(request, started, deadline, waitMs);
    } finally {
      if (waitMs > 0) this.c.doneWaiting(key);
    }
  }

  /** acquire.lua, and the wait it may lead to. */
  private async queue(
    request: AcquireRequest,
    started: Started,
    deadline: number,
    waitMs: number,
  ): Promise<LockGrant | LockBusy> {
    const { key, token, leaseMs } = request;
    const { waiters, grants, releases } = this.c;
    const id = handoffId(key, token);
    waiters.acquiring.add(id);
    const sentAt = monotonicNow();
    let reply: AcquireReply;
    try {
      reply = parseAcquireReply(
        await this.c.calls.call(
          this.c.commands.acquire(key, token, leaseMs, waitMs),
          'acquire',
          (late) => releases.undoAcquire(key, token, parseAcquireReply(late)),
        ),
      );
    } catch (error) {
      grants.forgetEarlyHandoff(key, token);
      throw error;
    } finally {
      waiters.acquiring.delete(id);
    }

    if (this.c.closed) {
      // close() has sent the waiters away already: neither hold nor wait now.
      grants.forgetEarlyHandoff(key, token);
      releases.undoAcquire(key, token, reply);
      return { acquired: false };
    }
    if (reply[0] === 1) {
      // Not queued, so no hand-off was meant for this acquisition.
      grants.forgetEarlyHandoff(key, token);
      const fencingToken = Number(reply[1]);
      if (!isFresh(leaseDeadline(sentAt, leaseMs), leaseMs))
        return this.confirmTaken(request, started, fencingToken, true);
      grants.holdLocally(key, token, sentAt + leaseMs);
      return {
        acquired: true,
        fencingToken,
        leaseMs: sentAt + leaseMs - started.calledAt,
      };
    }
    const [, pttl, entry, holder] = reply;
    this.c.contended.remember(key);
    if (entry === undefined) {
      grants.forgetEarlyHandoff(key, token);
      if (holder !== undefined && !started.freedDeadHolder)
        return this.unlessHolderDied(request, started, holder, pttl);
      return busy(pttl);
    }
    return this.c.waiting.wait(
      request,
      entry,
      started,
      sentAt,
      deadline,
      this.c.holderSessions.firstCheckIn(holder, Number(pttl)),
    );
  }
}
