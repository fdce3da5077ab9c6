import type { Cluster, Redis } from 'ioredis';
import type { PassStreak } from './local-holds.js';
import { bypassKey, fenceKey, queueKey } from './lock-keys.js';
import { defineLockScripts, type LockScriptCommands } from './lock-scripts.js';
import type { RedisLockSettings } from './redis-lock-options.js';

/**
 * The lock scripts of one backend, each called with the keys it touches (the
 * lock, its fencing counter, its queue, the queue's pass-over record: all in
 * the lock's Cluster slot) and the backend's settings. Answers come back
 * raw, for the caller to bound and parse.
 */
export class LockCommands {
  private readonly scripts: LockScriptCommands;

  /**
   * @param wakeTarget how queue entries name this process's wake-up: its
   *   wake list, as scripts see it.
   */
  constructor(
    client: Redis | Cluster,
    private readonly settings: RedisLockSettings,
    private readonly wakeTarget: string,
  ) {
    this.scripts = defineLockScripts(client);
  }

  // The two scripts of every lock cycle pass their keys one by one: spreading
  // an array of keys here would build one per call on the hot path.

  /** acquire.lua: take the lock, or queue for it when `waitMs` > 0. */
  acquire(
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
      this.wakeTarget,
      this.settings.handoffLeaseMs,
    );
  }

  /**
   * acquire-fenced.lua: take a free lock with its fencing token, as the bare
   * `SET NX PX` takes it without; 0 for a busy one, which acquire.lua settles.
   */
  acquireFenced(key: string, token: string, leaseMs: number): Promise<unknown> {
    return this.scripts.lockAcquireFenced(
      key,
      fenceKey(key),
      token,
      Math.ceil(leaseMs),
    );
  }

  /**
   * release.lua: free the lock and serve its queue; with `fencingToken`, only
   * while that grant is the current one. `successor` (token and hand-off
   * lease) takes the lock in the same step when nobody is queued.
   */
  release(
    key: string,
    token: string,
    fencingToken: number | undefined,
    passedInMemory: PassStreak | undefined,
    successor: { token: string; leaseMs: number } | undefined,
  ): Promise<unknown> {
    return this.scripts.lockRelease(
      key,
      fenceKey(key),
      queueKey(key),
      bypassKey(key),
      token,
      this.wakeTarget,
      this.settings.localHandoffs,
      this.settings.localHandoffWindowMs,
      fencingToken ?? '',
      passedInMemory?.passes ?? 0,
      passedInMemory?.sinceFirstMs ?? 0,
      successor?.token ?? '',
      successor ? Math.ceil(successor.leaseMs) : 0,
    );
  }

  /** release-unqueued.lua: compare and delete, declining (-1) when anyone queues. */
  releaseUnqueued(key: string, token: string): Promise<unknown> {
    return this.scripts.lockReleaseUnqueued(key, queueKey(key), token);
  }

  /** extend.lua: set the lease if `token` holds the lock. */
  extend(key: string, token: string, leaseMs: number): Promise<unknown> {
    return this.scripts.lockExtend(key, token, Math.ceil(leaseMs));
  }

  /** fence.lua: the next fencing token, if `token` holds the lock. */
  fence(key: string, token: string): Promise<unknown> {
    return this.scripts.lockFence(key, fenceKey(key), token);
  }

  /**
   * pass-on.lua: the lock stored under `storedAs` goes to a waiter of this
   * process with `leaseMs`, taking its queue `entry` ('' for none) out; with
   * `fence`, the new holder's fencing token is issued in the same step.
   */
  passOn(
    key: string,
    storedAs: string,
    entry: string,
    leaseMs: number,
    fence: boolean,
  ): Promise<unknown> {
    return this.scripts.lockPassOn(
      key,
      queueKey(key),
      bypassKey(key),
      fenceKey(key),
      storedAs,
      entry,
      Math.ceil(leaseMs),
      fence ? 1 : 0,
    );
  }

  /** cancel.lua: leave the queue, or keep a lock handed over meanwhile. */
  cancel(key: string, token: string, entry: string): Promise<unknown> {
    return this.scripts.lockCancel(
      key,
      fenceKey(key),
      queueKey(key),
      bypassKey(key),
      token,
      entry,
    );
  }

  /**
   * kick.lua: serve a lock whose holder died (its lease ran out, or its
   * session: `deadHolder` is that holder's token, '' for none), and report
   * each entry's state.
   */
  kick(key: string, entries: string[], deadHolder = ''): Promise<unknown> {
    return this.scripts.lockKick(
      key,
      fenceKey(key),
      queueKey(key),
      deadHolder,
      ...entries,
    );
  }
}
