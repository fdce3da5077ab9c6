/**
 * One contract suite for every {@link SemaphoreBackend}: memory, one Redis,
 * a Redis Cluster. A factory opens "processes", each its own backend on its
 * own connection to one shared store, each wrapped in its own
 * SemaphoreService, as separate instances of an app would be.
 */
import { randomBytes } from 'node:crypto';
import { LockLostError } from '../../src/errors/lock-errors.js';
import type { SemaphoreBackend } from '../../src/semaphore/semaphore-backend.js';
import {
  SemaphoreLimitMismatchError,
  SemaphoreNotAcquiredError,
} from '../../src/semaphore/semaphore-errors.js';
import { SemaphoreService } from '../../src/semaphore/semaphore.service.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';

export interface SemaphoreBackendFactory {
  setUp?(): Promise<void>;
  tearDown?(): Promise<void>;
  /** `count` backends on one shared store; `close` closes them all. */
  open(count: number): Promise<{
    backends: readonly SemaphoreBackend[];
    close(): Promise<void>;
  }>;
}

const rejectionOf = async (promise: Promise<unknown>): Promise<Error> => {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
};

export function describeSemaphoreContract(
  label: string,
  factory: SemaphoreBackendFactory,
): void {
  describe(`semaphore contract: ${label}`, () => {
    let services: SemaphoreService[] = [];
    let closeAll: (() => Promise<void>) | undefined;
    let name = '';

    beforeAll(async () => factory.setUp?.());
    afterAll(async () => factory.tearDown?.());
    beforeEach(async () => {
      const opened = await factory.open(3);
      services = opened.backends.map(
        (backend) =>
          new SemaphoreService({
            backend,
            keyPrefix: 'contract:',
            leaseTime: 1_000,
            waitTime: 0,
            maxKeyLength: 200,
          }),
      );
      closeAll = opened.close;
      name = `api-${randomBytes(4).toString('hex')}`;
    });
    afterEach(async () => {
      await closeAll?.();
    });

    it('never lets more than N hold at once across processes', async () => {
      let inside = 0;
      let most = 0;
      const calls = services.flatMap((service) =>
        Array.from({ length: 8 }, () =>
          service.using(
            name,
            async () => {
              inside += 1;
              most = Math.max(most, inside);
              await sleep(15);
              inside -= 1;
            },
            { limit: 3, waitTime: 10_000 },
          ),
        ),
      );
      await Promise.all(calls);
      expect(most).toBe(3);
    });

    it('takes k permits at once', async () => {
      const [a, b] = services;
      const three = await a.acquire(name, { limit: 5, permits: 3 });
      expect(await b.tryAcquire(name, { limit: 5, permits: 3 })).toBeNull();
      const two = await b.tryAcquire(name, { limit: 5, permits: 2 });
      expect(two).not.toBeNull();
      expect(await b.tryAcquire(name, { limit: 5 })).toBeNull();
      await three.release();
      await two!.release();
      const five = await a.tryAcquire(name, { limit: 5, permits: 5 });
      expect(five?.permits).toBe(5);
      await five!.release();
    });

    it('serves a large request at the head before smaller ones behind it', async () => {
      const [a, b, c] = services;
      const small = await Promise.all(
        [0, 1, 2].map(() => a.acquire(name, { limit: 4 })),
      );
      const order: string[] = [];
      const large = b
        .acquire(name, { limit: 4, permits: 4, waitTime: 10_000 })
        .then(async (handle) => {
          order.push('large');
          await sleep(50);
          await handle.release();
        });
      await sleep(50);
      // One permit is free all along, yet later small requests wait.
      const later = [0, 1, 2].map((i) =>
        c.using(name, () => void order.push(`small-${i}`), {
          limit: 4,
          waitTime: 10_000,
        }),
      );
      await sleep(150);
      expect(order).toEqual([]);
      for (const handle of small) await handle.release();
      await Promise.all([large, ...later]);
      expect(order[0]).toBe('large');
      expect(order).toHaveLength(4);
    });

    it('serves equal (k=1) requests in arrival order', async () => {
      const held = await services[0].acquire(name, { limit: 1 });
      // A first wait opens the process's pub/sub connection, which on a
      // loaded machine can take longer than the gap between arrivals below.
      await Promise.all(
        services.map((service) =>
          rejectionOf(service.acquire(name, { limit: 1, waitTime: 50 })),
        ),
      );
      const order: number[] = [];
      const queued: Promise<void>[] = [];
      // Arrivals from the processes in another order than their index.
      const arrivals = [2, 0, 1, 2, 0].map((s) => services[s]);
      for (const [i, service] of arrivals.entries()) {
        queued.push(
          service.using(name, () => void order.push(i), {
            limit: 1,
            waitTime: 10_000,
          }),
        );
        // Each has taken its place before the next asks.
        await sleep(100);
      }
      await held.release();
      await Promise.all(queued);
      expect(order).toEqual([0, 1, 2, 3, 4]);
    });

    it('is busy once the wait time runs out', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1 });
      const started = performance.now();
      const error = await rejectionOf(
        b.acquire(name, { limit: 1, waitTime: 300 }),
      );
      expect(error).toBeInstanceOf(SemaphoreNotAcquiredError);
      expect(performance.now() - started).toBeGreaterThanOrEqual(280);
      await held.release();
      // The one that gave up left the queue: the next caller goes at once.
      const next = await b.tryAcquire(name, { limit: 1 });
      expect(next).not.toBeNull();
      await next!.release();
    });

    it('stops waiting when the signal aborts', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1 });
      const stop = new AbortController();
      setTimeout(() => stop.abort(), 100);
      const started = performance.now();
      const error = await rejectionOf(
        b.acquire(name, { limit: 1, waitTime: 10_000, signal: stop.signal }),
      );
      expect(error).toBeInstanceOf(SemaphoreNotAcquiredError);
      expect(performance.now() - started).toBeLessThan(2_000);
      await held.release();
    });

    it('rejects a caller whose limit differs while the semaphore is in use', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 2 });
      const error = await rejectionOf(b.acquire(name, { limit: 3 }));
      expect(error).toBeInstanceOf(SemaphoreLimitMismatchError);
      expect(error).toMatchObject({
        code: 'SEMAPHORE_LIMIT_MISMATCH',
        requested: 3,
        current: 2,
      });
      await held.release();
      // Idle again: the next caller sets the limit.
      const other = await b.acquire(name, { limit: 3 });
      await other.release();
    });

    it('releases only its own permits, once', async () => {
      const [a, b] = services;
      const backend = (
        a as unknown as { settings: { backend: SemaphoreBackend } }
      ).settings.backend;
      const held = await a.acquire(name, { limit: 1 });
      expect(await backend.release(a.storeKey(name), 'not-the-owner')).toBe(
        false,
      );
      expect(await b.tryAcquire(name, { limit: 1 })).toBeNull();
      expect(await held.release()).toBe(true);
      const next = await b.acquire(name, { limit: 1 });
      expect(await held.release()).toBe(true);
      expect(await backend.release(a.storeKey(name), held.token)).toBe(false);
      expect(await a.tryAcquire(name, { limit: 1 })).toBeNull();
      await next.release();
    });

    it('extends a lease', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1, leaseTime: 300 });
      expect(await held.extend(2_000)).toBe(true);
      await sleep(600);
      expect(held.lost).toBe(false);
      expect(await b.tryAcquire(name, { limit: 1 })).toBeNull();
      await held.release();
    });

    it('gives permits back when their lease ends', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1, leaseTime: 300 });
      const started = performance.now();
      const next = await b.acquire(name, { limit: 1, waitTime: 5_000 });
      expect(performance.now() - started).toBeLessThan(1_500);
      expect(held.signal.aborted).toBe(true);
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      expect(await held.release()).toBe(false);
      await next.release();
    });

    it('keeps a watchdog hold past its lease', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1 });
      await sleep(1_500);
      expect(held.lost).toBe(false);
      expect(await b.tryAcquire(name, { limit: 1 })).toBeNull();
      await held.release();
    });

    it('keeps a watchdog hold granted after waiting longer than its lease', async () => {
      const [a, b] = services;
      const held = await a.acquire(name, { limit: 1, leaseTime: 1_300 });
      const next = await b.acquire(name, { limit: 1, waitTime: 10_000 });
      await sleep(1_200);
      expect(next.lost).toBe(false);
      expect(await a.tryAcquire(name, { limit: 1 })).toBeNull();
      expect(await held.release()).toBe(false);
      expect(await next.release()).toBe(true);
    });

    it('wakes every queued caller that fits as soon as permits are released', async () => {
      const [a, b, c] = services;
      const held = await a.acquire(name, {
        limit: 2,
        permits: 2,
        leaseTime: 20_000,
      });
      const grantedAt: number[] = [];
      const waiting = [b, c].map((service) =>
        service.acquire(name, { limit: 2, waitTime: 10_000 }).then((handle) => {
          grantedAt.push(performance.now());
          return handle;
        }),
      );
      await sleep(300);
      const releasedAt = performance.now();
      await held.release();
      const next = await Promise.all(waiting);
      // Both at once: the second is not left to its 1 s re-check.
      for (const at of grantedAt) expect(at - releasedAt).toBeLessThan(200);
      for (const handle of next) await handle.release();
    });
  });
}
