import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
} from '../lock-backend.js';
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
  /** Prefix of this backend's own bookkeeping keys (the wake list). Default `'lock:'`. */
  readonly keyPrefix?: string;
}

const defaults = {
  commandTimeoutMs: 2000,
  handoffLeaseMs: 3000,
  keyPrefix: 'lock:',
};

/** Seconds a blocking pop waits before the listener checks whether it is still needed. */
const listenPollSeconds = 1;
/** A hand-off message for a waiter that already took the lock is ignored for this long. */
const claimedMemoryMs = 60_000;

interface Waiter {
  readonly key: string;
  readonly token: string;
  readonly leaseMs: number;
  readonly deadline: number;
  entry: string;
  cancelling: boolean;
  timer?: NodeJS.Timeout;
  readonly signal?: AbortSignal;
  readonly onAbort: () => void;
  readonly resolve: (result: LockGrant | LockBusy) => void;
  readonly reject: (error: unknown) => void;
}

type AcquireReply = [1, number] | [0, number, string?];

/**
 * Lock store on one Redis server (standalone or behind Sentinel).
 *
 * Waiting is a FIFO queue per key: a busy acquisition appends itself to the
 * key's queue, and whoever frees the lock hands it, inside the same script, to
 * the oldest live waiter, then wakes only that waiter by pushing to its
 * process's wake list, which one blocking connection per process pops. Nobody
 * polls, nobody stampedes, and a releasing holder cannot barge back in ahead of
 * the queue. A per-key safety check (at most every `handoffLeaseMs`) covers a
 * holder that dies without releasing.
 */
export class RedisLockBackend implements LockBackend {
  private readonly client: Redis;
  private readonly scripts: LockScriptCommands;
  private readonly commandTimeoutMs: number;
  private readonly handoffLeaseMs: number;
  private readonly ownsClient: boolean;
  /** The client's own ioredis `keyPrefix`, which scripts do not see on keys built inside them. */
  private readonly clientKeyPrefix: string;
  private readonly wakeList: string;

  private readonly waiters = new Map<string, Waiter>();
  private readonly waitersByKey = new Map<string, Set<Waiter>>();
  private readonly acquiring = new Set<string>();
  private readonly earlyHandoffs = new Map<string, number>();
  private readonly claimed = new Map<string, number>();
  private readonly checkTimers = new Map<string, NodeJS.Timeout>();
  private blocking?: Redis;
  private listening = false;
  private closed = false;

  constructor(options: RedisLockBackendOptions) {
    this.client = options.client;
    this.ownsClient = options.ownsClient ?? false;
    this.commandTimeoutMs =
      options.commandTimeoutMs ?? defaults.commandTimeoutMs;
    this.handoffLeaseMs = options.handoffLeaseMs ?? defaults.handoffLeaseMs;
    this.scripts = defineLockScripts(this.client);
    this.clientKeyPrefix = this.client.options?.keyPrefix ?? '';
    const instanceId = randomBytes(16).toString('hex');
    this.wakeList = `${options.keyPrefix ?? defaults.keyPrefix}wake:${instanceId}`;
  }

  async acquire(request: AcquireRequest): Promise<LockGrant | LockBusy> {
    this.assertOpen();
    const { key, token, leaseMs } = request;
    const waitMs = request.signal?.aborted
      ? 0
      : Math.max(0, Math.floor(request.waitMs));
    const startedAt = Date.now();

    this.acquiring.add(token);
    let reply: AcquireReply;
    try {
      reply = (await this.call(
        this.scripts.lockAcquire(
          ...this.lockKeys(key),
          token,
          Math.ceil(leaseMs),
          waitMs,
          this.localWakeList(),
          this.handoffLeaseMs,
        ),
        'acquire',
        (late) => this.undoLateAcquire(key, token, late as AcquireReply),
      )) as AcquireReply;
    } catch (error) {
      this.forgetEarlyHandoff(key, token);
      throw error;
    } finally {
      this.acquiring.delete(token);
    }

    if (reply[0] === 1) {
      return { acquired: true, fencingToken: Number(reply[1]), leaseMs };
    }
    const [, pttl, entry] = reply;
    if (entry === undefined) {
      return busy(pttl);
    }
    return this.wait(request, entry, startedAt + waitMs, Number(pttl));
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    this.assertOpen();
    const result = await this.call(
      this.scripts.lockExtend(key, token, Math.ceil(leaseMs)),
      'extend',
    );
    return Number(result) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    this.assertOpen();
    const result = await this.call(
      this.scripts.lockRelease(
        ...this.lockKeys(key),
        token,
        this.localWakeList(),
      ),
      'release',
    );
    if (typeof result === 'string') {
      // Handed to a waiter of this process: deliver it without a trip through Redis.
      const [nextToken, fencingToken] = result.split('|');
      this.deliver(nextToken, Number(fencingToken), key);
      return true;
    }
    return Number(result) === 1;
  }

  async isLocked(key: string): Promise<boolean> {
    this.assertOpen();
    return Number(await this.call(this.client.exists(key), 'exists')) === 1;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.checkTimers.values()) clearTimeout(timer);
    this.checkTimers.clear();
    const leaving = [...this.waiters.values()];
    for (const waiter of leaving) {
      this.settle(waiter, { acquired: false });
    }
    // Leave the queues so nobody hands a lock to a process that is going away.
    await Promise.allSettled(
      leaving.map((waiter) =>
        this.cancelEntry(waiter.key, waiter.token, waiter.entry),
      ),
    );
    this.blocking?.disconnect();
    this.blocking = undefined;
    if (this.ownsClient) {
      await this.client.quit().catch(() => this.client.disconnect());
    }
  }

  private lockKeys(key: string): [string, string, string] {
    return [key, `${key}:fence`, `${key}:queue`];
  }

  private wait(
    request: AcquireRequest,
    entry: string,
    deadline: number,
    holderPttl: number,
  ): Promise<LockGrant | LockBusy> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        key: request.key,
        token: request.token,
        leaseMs: request.leaseMs,
        deadline,
        entry,
        cancelling: false,
        signal: request.signal,
        onAbort: () => void this.giveUp(waiter),
        resolve,
        reject,
      };
      this.waiters.set(waiter.token, waiter);
      let sameKey = this.waitersByKey.get(waiter.key);
      if (!sameKey) this.waitersByKey.set(waiter.key, (sameKey = new Set()));
      sameKey.add(waiter);
      waiter.timer = setTimeout(
        waiter.onAbort,
        Math.max(0, deadline - Date.now()),
      );
      request.signal?.addEventListener('abort', waiter.onAbort, { once: true });

      const early = this.earlyHandoffs.get(waiter.token);
      if (early !== undefined) {
        this.earlyHandoffs.delete(waiter.token);
        this.grant(waiter, early);
        return;
      }
      this.scheduleCheck(waiter.key, holderPttl);
      this.listen();
    });
  }

  private grant(waiter: Waiter, fencingToken: number, leaseMs?: number): void {
    this.settle(waiter, {
      acquired: true,
      fencingToken,
      leaseMs: leaseMs ?? Math.min(waiter.leaseMs, this.handoffLeaseMs),
    });
  }

  private settle(waiter: Waiter, result: LockGrant | LockBusy | Error): void {
    if (this.waiters.get(waiter.token) !== waiter) return;
    this.waiters.delete(waiter.token);
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
  }

  /** The wait ran out or was aborted: leave the queue, unless the lock arrived meanwhile. */
  private async giveUp(waiter: Waiter): Promise<void> {
    if (waiter.cancelling || this.waiters.get(waiter.token) !== waiter) return;
    waiter.cancelling = true;
    try {
      const outcome = await this.cancelEntry(
        waiter.key,
        waiter.token,
        waiter.entry,
      );
      if (outcome.claimed) {
        this.rememberClaimed(waiter.token);
        this.grant(waiter, outcome.fencingToken, outcome.leaseMs);
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
    | { claimed: true; fencingToken: number; leaseMs: number }
    | { claimed: false; holderPttl: number }
  > {
    const reply = (await this.call(
      this.scripts.lockCancel(...this.lockKeys(key), token, entry),
      'cancel',
    )) as [number, number, number?];
    if (reply[0] !== 1) return { claimed: false, holderPttl: Number(reply[1]) };
    return {
      claimed: true,
      fencingToken: Number(reply[1]),
      leaseMs: Math.max(1, Number(reply[2])),
    };
  }

  /** Blocks on this process's wake list while anyone here waits. One loop at a time. */
  private listen(): void {
    if (this.listening || this.closed) return;
    this.listening = true;
    void this.listenLoop();
  }

  private async listenLoop(): Promise<void> {
    this.blocking ??= this.client.duplicate();
    const blocking = this.blocking;
    while (!this.closed && (this.waiters.size > 0 || this.acquiring.size > 0)) {
      try {
        const popped = await blocking.blpop(this.wakeList, listenPollSeconds);
        if (popped) this.onWakeMessage(popped[1]);
      } catch {
        if (this.closed) break;
        // Redis is away: waiters time out on their own; try again shortly.
        await new Promise((resolve) => setTimeout(resolve, 100).unref());
      }
    }
    this.listening = false;
    if (!this.closed && this.waiters.size > 0) this.listen();
  }

  private onWakeMessage(message: string): void {
    const first = message.indexOf('|');
    const second = message.indexOf('|', first + 1);
    const token = message.slice(0, first);
    const fencingToken = Number(message.slice(first + 1, second));
    this.deliver(
      token,
      fencingToken,
      this.withoutClientPrefix(message.slice(second + 1)),
    );
  }

  /** A lock was handed to `token`: wake its waiter, or pass the lock on if nobody here wants it. */
  private deliver(token: string, fencingToken: number, key: string): void {
    const waiter = this.waiters.get(token);
    if (waiter) {
      // While giving up, the cancel script decides who keeps the lock.
      if (!waiter.cancelling) this.grant(waiter, fencingToken);
    } else if (this.claimed.delete(token)) {
      // The waiter already took this lock when it gave up; nothing to do.
    } else if (this.acquiring.has(token)) {
      this.earlyHandoffs.set(token, fencingToken);
    } else {
      // Nobody here wants this lock any more: pass it on at once.
      this.release(key, token).catch(() => undefined);
    }
  }

  private forgetEarlyHandoff(key: string, token: string): void {
    if (this.earlyHandoffs.delete(token)) {
      this.release(key, token).catch(() => undefined);
    }
  }

  /** An acquire we stopped waiting for was applied after all: give back what it got. */
  private undoLateAcquire(
    key: string,
    token: string,
    reply: AcquireReply,
  ): void {
    if (this.closed && !this.ownsClient) return;
    if (reply[0] === 1) {
      this.release(key, token).catch(() => undefined);
    } else if (reply[2] !== undefined) {
      this.cancelEntry(key, token, reply[2])
        .then((outcome) => outcome.claimed && this.release(key, token))
        .catch(() => undefined);
    }
  }

  private rememberClaimed(token: string): void {
    const now = Date.now();
    for (const [old, at] of this.claimed) {
      if (now - at < claimedMemoryMs) break;
      this.claimed.delete(old);
    }
    this.claimed.set(token, now);
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
    const timer = setTimeout(() => void this.check(key), delay);
    timer.unref();
    this.checkTimers.set(key, timer);
  }

  private async check(key: string): Promise<void> {
    this.checkTimers.delete(key);
    if (!this.waitersByKey.has(key) || this.closed) return;
    let pttl = this.handoffLeaseMs;
    try {
      pttl = Number(
        await this.call(this.scripts.lockKick(...this.lockKeys(key)), 'check'),
      );
      if (pttl === -2) await this.requeue(key);
    } catch {
      // Redis is away; look again later.
    }
    if (this.waitersByKey.has(key)) this.scheduleCheck(key, pttl);
  }

  /**
   * The lock is free and the queue empty, yet waiters here are still waiting:
   * their entries were lost (Redis restarted, or the entries aged out). Queue
   * them again in their original order.
   */
  private async requeue(key: string): Promise<void> {
    const waiting = [...(this.waitersByKey.get(key) ?? [])];
    for (const waiter of waiting) {
      if (waiter.cancelling || this.waiters.get(waiter.token) !== waiter)
        continue;
      const remaining = waiter.deadline - Date.now();
      if (remaining <= 0) continue;
      this.acquiring.add(waiter.token);
      try {
        const reply = (await this.call(
          this.scripts.lockAcquire(
            ...this.lockKeys(key),
            waiter.token,
            Math.ceil(waiter.leaseMs),
            remaining,
            this.localWakeList(),
            this.handoffLeaseMs,
          ),
          'acquire',
        )) as AcquireReply;
        if (reply[0] === 1) {
          this.grant(waiter, Number(reply[1]), waiter.leaseMs);
        } else if (reply[2] !== undefined) {
          waiter.entry = reply[2];
        }
      } finally {
        this.acquiring.delete(waiter.token);
        const early = this.earlyHandoffs.get(waiter.token);
        if (early !== undefined) {
          this.earlyHandoffs.delete(waiter.token);
          this.grant(waiter, early);
        }
      }
    }
  }

  /** The wake list's name as scripts see it (with the client's own key prefix). */
  private localWakeList(): string {
    return this.clientKeyPrefix + this.wakeList;
  }

  private withoutClientPrefix(key: string): string {
    return this.clientKeyPrefix && key.startsWith(this.clientKeyPrefix)
      ? key.slice(this.clientKeyPrefix.length)
      : key;
  }

  private assertOpen(): void {
    if (this.closed) throw new LockBackendError('The lock backend is closed');
  }

  /**
   * Runs one Redis call with a deadline, whatever the client's own settings
   * (an offline queue without timeout would otherwise hang a request forever).
   * A call that answers after we gave up is handed to `onLate`.
   */
  private call<T>(
    pending: Promise<T>,
    what: string,
    onLate?: (value: T) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        reject(
          new LockBackendError(
            `Redis did not answer the lock ${what} within ${this.commandTimeoutMs} ms`,
          ),
        );
      }, this.commandTimeoutMs);
      pending.then(
        (value) => {
          clearTimeout(timer);
          if (timedOut) onLate?.(value);
          else resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          if (!timedOut) {
            reject(
              new LockBackendError(
                `Redis lock ${what} failed: ${(error as Error)?.message ?? String(error)}`,
                { cause: error },
              ),
            );
          }
        },
      );
    });
  }
}

function busy(pttl: number): LockBusy {
  const remaining = Number(pttl);
  return remaining > 0
    ? { acquired: false, retryAfterMs: remaining }
    : { acquired: false };
}
