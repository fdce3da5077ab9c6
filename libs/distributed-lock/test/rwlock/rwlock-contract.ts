/**
 * One contract suite for read-write locks on every semaphore store: memory,
 * one Redis, a Redis Cluster. Exclusion, queueing and wake-ups here; fencing,
 * reentrancy, leases and errors in rwlock-contract-holds.ts.
 */
import { sleep } from '../../../../test/support/lock-fixtures.js';
import type { ReadWriteLockHandle } from '../../src/rwlock/read-write-lock-handle.js';
import { describeHoldContract } from './rwlock-contract-holds.js';
import {
  useReadWriteLockWorld,
  type ReadWriteLockFactory,
} from './rwlock-contract-support.js';

const WAIT = { waitTime: 10_000 } as const;

/**
 * How long after `held` is released `waiting` is granted, in ms (both are
 * released after).
 */
async function timeToGrant(
  held: ReadWriteLockHandle,
  waiting: Promise<ReadWriteLockHandle>,
): Promise<number> {
  let grantedAt = 0;
  const granted = waiting.then((handle) => {
    grantedAt = performance.now();
    return handle;
  });
  await sleep(300);
  const releasedAt = performance.now();
  await held.release();
  await (await granted).release();
  return grantedAt - releasedAt;
}

export function describeReadWriteLockContract(
  label: string,
  factory: ReadWriteLockFactory,
): void {
  describe(`read-write lock contract: ${label}`, () => {
    beforeAll(async () => factory.setUp?.());
    afterAll(async () => factory.tearDown?.());
    const world = useReadWriteLockWorld(factory);

    it('lets readers of several processes share the lock', async () => {
      const { services, name } = world();
      const readers = await Promise.all(
        services.flatMap((s) => [s.tryRead(name), s.tryRead(name)]),
      );
      expect(readers.every((r) => r !== null)).toBe(true);
      expect(readers.map((r) => r!.mode)).toEqual(Array(6).fill('read'));
      expect(readers[0]!.fencingToken).toBeUndefined();
      expect(await services[0].tryWrite(name)).toBeNull();
      for (const reader of readers) expect(await reader!.release()).toBe(true);
    });

    it('gives a writer the lock alone', async () => {
      const [a, b, c] = world().services;
      const { name } = world();
      const writer = await a.write(name);
      expect(writer.mode).toBe('write');
      expect(await b.tryRead(name)).toBeNull();
      expect(await c.tryWrite(name)).toBeNull();
      expect(await writer.release()).toBe(true);
      const reader = await b.tryRead(name);
      expect(reader).not.toBeNull();
      expect(await c.tryWrite(name)).toBeNull();
      await reader!.release();
      const next = await c.tryWrite(name);
      expect(next).not.toBeNull();
      await next!.release();
    });

    it('holds back later readers behind a queued writer, which goes when earlier readers leave', async () => {
      const [a, b, c] = world().services;
      const { name } = world();
      const early = await Promise.all([a.read(name), c.read(name)]);
      const order: string[] = [];
      const writer = b.write(name, WAIT).then(async (handle) => {
        order.push('writer');
        await sleep(100);
        order.push('writer-done');
        await handle.release();
      });
      await sleep(150);
      // The lock is only read-held, yet a new reader waits behind the writer.
      expect(await c.tryRead(name)).toBeNull();
      const late = [a, c].map((s, i) =>
        s.withRead(name, () => void order.push(`late-reader-${i}`), WAIT),
      );
      await sleep(150);
      expect(order).toEqual([]);
      await early[0].release();
      await sleep(100);
      expect(order).toEqual([]);
      await early[1].release();
      await Promise.all([writer, ...late]);
      expect(order.slice(0, 2)).toEqual(['writer', 'writer-done']);
      expect(order.slice(2).toSorted()).toEqual([
        'late-reader-0',
        'late-reader-1',
      ]);
    });

    it('serves waiting writers first come, first served', async () => {
      const { services, name } = world();
      const first = await services[0].write(name);
      const order: number[] = [];
      const queued: Promise<void>[] = [];
      for (const i of [0, 1, 2, 3]) {
        queued.push(
          services[(i + 1) % 3].withWrite(
            name,
            async () => {
              order.push(i);
              await sleep(10);
            },
            WAIT,
          ),
        );
        // Each has taken its place before the next asks.
        await sleep(100);
      }
      await first.release();
      await Promise.all(queued);
      expect(order).toEqual([0, 1, 2, 3]);
    });

    it('never lets a writer overlap anyone across processes', async () => {
      const { services, name } = world();
      let readers = 0;
      let writers = 0;
      let mostReaders = 0;
      let clashes = 0;
      const calls = services.flatMap((service, s) =>
        Array.from({ length: 6 }, (_, i) =>
          (i + s) % 3 === 0
            ? service.withWrite(
                name,
                async () => {
                  writers += 1;
                  if (writers > 1 || readers > 0) clashes += 1;
                  await sleep(5);
                  writers -= 1;
                },
                WAIT,
              )
            : service.withRead(
                name,
                async () => {
                  readers += 1;
                  mostReaders = Math.max(mostReaders, readers);
                  if (writers > 0) clashes += 1;
                  await sleep(20);
                  readers -= 1;
                },
                WAIT,
              ),
        ),
      );
      await Promise.all(calls);
      expect(clashes).toBe(0);
      expect(mostReaders).toBeGreaterThan(1);
    });

    it('wakes a waiting reader as soon as the writer releases, and a writer as soon as the last reader does', async () => {
      const [a, b] = world().services;
      const { name } = world();
      const long = { leaseTime: 20_000 };
      expect(
        await timeToGrant(await a.write(name, long), b.read(name, WAIT)),
      ).toBeLessThan(200);
      expect(
        await timeToGrant(await a.read(name, long), b.write(name, WAIT)),
      ).toBeLessThan(200);
    });

    describeHoldContract(world, factory);
  });
}
