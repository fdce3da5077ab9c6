import type { Cluster, Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import { answerWithin } from '../../backends/answer-deadline.js';
import { monotonicNow } from '../../lease/lease-clock.js';
import type {
  SemaphoreBackend,
  SemaphoreBusy,
  SemaphoreGrant,
  SemaphoreRequest,
} from '../semaphore-backend.js';
import { SemaphoreLimitMismatchError } from '../semaphore-errors.js';
import {
  defineSemaphoreScripts,
  fenceCounterKey,
  semaphoreKeys,
  wakeChannel,
  type SemaphoreScripts,
} from './semaphore-scripts.js';
import {
  SemaphoreWakeListener,
  type SemaphoreWaiter,
} from './wake-listener.js';

export interface RedisSemaphoreBackendOptions {
  /** A Redis or Cluster client; shared with the lock backend in the module. */
  readonly client: Redis | Cluster;
  /** Close `client` on {@link RedisSemaphoreBackend.close}. Default false. */
  readonly ownsClient?: boolean;
  /** Bound on every command, in ms. Default 2000. */
  readonly commandTimeoutMs?: number;
  /**
   * How long a waiter's place in the queue lasts unless it asks again, in ms;
   * a waiter asks again every third of it. A waiter that died leaves the
   * queue within it. Default 3000.
   */
  readonly queueTtlMs?: number;
}

type Reply = [status: number, value: number, fencingToken?: number];

/**
 * Semaphores on one Redis server or a Redis Cluster. The semaphore's holders,
 * queue and limit sit in six keys under its `{name}` hash tag, and every
 * verb is one Lua script over them (see scripts/common.lua), so each step
 * is atomic on the one node that owns the slot.
 *
 * Waiting: a busy caller takes a place in the semaphore's FIFO queue, with
 * the permits it asks for. A caller may take permits only when they fit once
 * everyone ahead of it has been served, so a large request holds back the
 * small ones behind it and is never starved, while several small ones at
 * the front are served at once. A waiter sleeps until the store names it
 * over pub/sub (whoever frees permits or leaves the queue names every
 * queued caller that now fits, in order), or until the earliest lease ends
 * (an expiry publishes nothing, as no script runs then), or to renew its
 * place in the queue, whichever comes first.
 */
export class RedisSemaphoreBackend implements SemaphoreBackend {
  private readonly client: Redis | Cluster;
  private readonly scripts: SemaphoreScripts;
  private readonly listener: SemaphoreWakeListener;
  private readonly commandTimeoutMs: number;
  private readonly queueTtlMs: number;
  private readonly stopAll = new AbortController();
  private closed = false;

  constructor(private readonly options: RedisSemaphoreBackendOptions) {
    this.client = options.client;
    this.scripts = defineSemaphoreScripts(options.client);
    this.listener = new SemaphoreWakeListener(options.client);
    this.commandTimeoutMs = options.commandTimeoutMs ?? 2_000;
    this.queueTtlMs = options.queueTtlMs ?? 3_000;
  }

  async acquire(
    request: SemaphoreRequest,
  ): Promise<SemaphoreGrant | SemaphoreBusy> {
    if (this.closed) throw closedError();
    const startedAt = monotonicNow();
    if (request.waitMs <= 0 || request.signal?.aborted) {
      try {
        return await this.attempt(request, false, startedAt);
      } catch (error) {
        // Timed out, the script may still run and grant the permits: the
        // release queues behind it on the connection and gives them back.
        void this.leaveQueue(request);
        throw error;
      }
    }
    const signal = AbortSignal.any([
      this.stopAll.signal,
      ...(request.signal ? [request.signal] : []),
    ]);
    const waiter = await this.bounded(
      this.listener.join(wakeChannel(request.key), request.token),
      'subscribe',
    );
    try {
      return await this.waitFor(request, waiter, startedAt, signal);
    } finally {
      this.listener.leave(waiter);
    }
  }

  private async waitFor(
    request: SemaphoreRequest,
    waiter: SemaphoreWaiter,
    startedAt: number,
    signal: AbortSignal,
  ): Promise<SemaphoreGrant | SemaphoreBusy> {
    const deadline = startedAt + request.waitMs;
    for (;;) {
      const wakes = waiter.wakes;
      let outcome: SemaphoreGrant | SemaphoreBusy;
      try {
        outcome = await this.attempt(request, true, startedAt);
      } catch (error) {
        await this.leaveQueue(request);
        throw error;
      }
      if (outcome.acquired) return outcome;
      const left = deadline - monotonicNow();
      if (left <= 0 || signal.aborted) {
        await this.leaveQueue(request);
        return outcome;
      }
      // Named as fitting while the answer was on its way: ask again at once.
      if (waiter.wakes !== wakes) continue;
      const expiry = outcome.retryAfterMs ?? Infinity;
      await waiter.sleep(
        Math.min(left, expiry + 1, this.queueTtlMs / 3),
        signal,
      );
    }
  }

  private async attempt(
    request: SemaphoreRequest,
    queue: boolean,
    startedAt: number,
  ): Promise<SemaphoreGrant | SemaphoreBusy> {
    const sentAt = monotonicNow();
    const [status, value, fencingToken] = (await this.call(
      this.scripts.semaphoreAcquire(
        ...semaphoreKeys(request.key),
        fenceCounterKey(request.key),
        request.token,
        request.permits,
        request.limit,
        request.leaseMs,
        queue ? '1' : '0',
        this.queueTtlMs,
        wakeChannel(request.key),
        request.fence === true ? '1' : '0',
      ),
      'acquire',
    )) as Reply;
    if (status === -1)
      throw new SemaphoreLimitMismatchError(
        request.name,
        request.limit,
        Number(value),
      );
    if (status === 1) {
      // The lease began after this send; the contract counts it from the
      // start of the call, so the wait before the send is added.
      const leaseMs = Number(value) + (sentAt - startedAt);
      return fencingToken === undefined || fencingToken === null
        ? { acquired: true, leaseMs }
        : { acquired: true, leaseMs, fencingToken: Number(fencingToken) };
    }
    const retry = Number(value);
    return retry >= 0
      ? { acquired: false, retryAfterMs: retry }
      : { acquired: false };
  }

  /** Gives up a place in the queue; a failure only leaves it to lapse. */
  private async leaveQueue(request: SemaphoreRequest): Promise<void> {
    await this.release(request.key, request.token).catch(() => undefined);
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    if (this.closed) throw closedError();
    const owned = await this.call(
      this.scripts.semaphoreExtend(...semaphoreKeys(key), token, leaseMs),
      'extend',
    );
    return Number(owned) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    const released = await this.call(
      this.scripts.semaphoreRelease(
        ...semaphoreKeys(key),
        token,
        wakeChannel(key),
      ),
      'release',
    );
    return Number(released) === 1;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopAll.abort();
    this.listener.close();
    if (this.options.ownsClient) this.client.disconnect();
  }

  private call(pending: Promise<unknown>, what: string): Promise<unknown> {
    return this.bounded(pending, what);
  }

  /**
   * `pending`, failing with `LockBackendError` after the command timeout
   * (an answer read after this process's own stall still counts).
   */
  private bounded<T>(pending: Promise<T>, what: string): Promise<T> {
    const answered = pending.catch((error: unknown) => {
      if (error instanceof SemaphoreLimitMismatchError) throw error;
      throw new LockBackendError(
        `Semaphore ${what} failed: ${(error as Error).message}`,
        { cause: error },
      );
    });
    return answerWithin(answered, this.commandTimeoutMs, {
      expired: () =>
        new LockBackendError(
          `Semaphore ${what}: Redis did not answer within ${this.commandTimeoutMs} ms`,
        ),
    });
  }
}

function closedError(): LockBackendError {
  return new LockBackendError('The semaphore backend is closed');
}
