/**
 * LockService on one Redis, callers contending for a lock: mutual exclusion
 * across processes and within one, waiting and hand-off, and multi-key locks.
 */
import { LockNotAcquiredError } from '@app/distributed-lock';
import { eventually, sleep } from '../../../test/support/lock-fixtures.js';
import { runTs, spawnTs } from '../../../test/support/processes.js';
import {
  redis,
  server,
  service,
  useLockServiceRedis,
} from './lock-service.test-support.js';

useLockServiceRedis();

describe('mutual exclusion', () => {
  it('keeps a non-atomic counter exact across 4 OS processes', async () => {
    const worker = 'test/support/workers/counter-worker.ts';
    const outputs = await Promise.all(
      [1, 2, 3, 4].map(() => runTs(worker, [server.url, '40', 'lock', '4'])),
    );
    expect(Number(await redis.get('counter'))).toBe(160);
    const tokens = outputs.flatMap(
      (out) => (JSON.parse(out) as { fencingTokens: number[] }).fencingTokens,
    );
    expect(new Set(tokens).size).toBe(160);
  });

  it('loses updates without the lock (the check above can fail)', async () => {
    const worker = 'test/support/workers/counter-worker.ts';
    await Promise.all(
      [1, 2, 3, 4].map(() => runTs(worker, [server.url, '40', 'nolock', '4'])),
    );
    expect(Number(await redis.get('counter'))).toBeLessThan(160);
  });

  it('lets one of many concurrent callers in at a time within a process', async () => {
    const locks = service();
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        locks.using('shared', async () => {
          maxInside = Math.max(maxInside, ++inside);
          await sleep(2);
          inside--;
        }),
      ),
    );
    expect(maxInside).toBe(1);
  });
});

describe('waiting', () => {
  it('wakes a waiter as soon as the lock is released, not on a polling tick', async () => {
    const locks = service();
    const holder = await locks.acquire('wake');
    let acquiredAt = 0;
    const waiting = locks
      .acquire('wake', { waitTime: 10_000 })
      .then((handle) => {
        acquiredAt = performance.now();
        return handle;
      });
    await sleep(300);
    const releasedAt = performance.now();
    await holder.release();
    const next = await waiting;
    expect(acquiredAt - releasedAt).toBeLessThan(100);
    await next.release();
  });

  it('lets the waiter it hands the lock to in this process run before the releaser goes on', async () => {
    const locks = service();
    const holder = await locks.acquire('next-first');
    const order: string[] = [];
    const waiting = locks
      .acquire('next-first', { waitTime: 10_000 })
      .then(async (handle) => {
        order.push('new holder starts');
        // A few steps of its own work, as the next request under the lock.
        for (let step = 0; step < 10; step++) await Promise.resolve();
        order.push('new holder is still going');
        return handle;
      });
    await sleep(100);
    await holder.release();
    order.push('releaser goes on');
    expect(order).toEqual([
      'new holder starts',
      'new holder is still going',
      'releaser goes on',
    ]);
    await (await waiting).release();
  });

  it('serves waiters across processes in arrival order', async () => {
    const holderLocks = service();
    const others = [service(), service(), service()];
    const holder = await holderLocks.acquire('fifo');
    const order: number[] = [];
    const waits: Promise<void>[] = [];
    for (const [index, locks] of others.entries()) {
      waits.push(
        locks.using('fifo', () => void order.push(index), { waitTime: 10_000 }),
      );
      await sleep(30);
    }
    await holder.release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2]);
  });

  it('gives up after waitTime with LockNotAcquiredError and leaves the queue', async () => {
    const locks = service();
    const holder = await locks.acquire('patience', { leaseTime: 5_000 });
    const started = performance.now();
    const error = await locks
      .acquire('patience', { waitTime: 200 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).key).toBe('patience');
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(await redis.llen('lock:{patience}:queue')).toBe(0);
    await holder.release();
    expect(await locks.isLocked('patience')).toBe(false);
  });

  it('wakes the next waiter when a lease expires without a release', async () => {
    const locks = service({ handoffLeaseMs: 500 });
    const abandoned = await locks.acquire('expire', { leaseTime: 300 });
    const started = performance.now();
    const next = await locks.acquire('expire', { waitTime: 5_000 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(abandoned.lost).toBe(true);
    await next.release();
  });

  it('a waiter whose process was killed in the queue stalls the others at most a hand-off lease', async () => {
    const handoffLeaseMs = 500;
    const holderLocks = service();
    const survivor = service({ handoffLeaseMs });
    const holder = await holderLocks.acquire('dead-waiter');
    const holderFence = await holder.fence();
    const doomed = spawnTs('test/support/workers/queued-waiter.ts', [
      server.url,
      'dead-waiter',
      String(handoffLeaseMs),
    ]);
    // Its start-up counts here: seconds on a busy machine, as with every
    // child process the suite waits for.
    await eventually(
      async () => (await redis.llen('lock:{dead-waiter}:queue')) === 1,
      20_000,
    );
    const survivorGot = survivor.acquire('dead-waiter', { waitTime: 20_000 });
    await eventually(
      async () => (await redis.llen('lock:{dead-waiter}:queue')) === 2,
    );
    doomed.kill('SIGKILL');
    await new Promise((resolve) => doomed.once('exit', resolve));

    const started = performance.now();
    await holder.release();
    const handle = await survivorGot;
    // Handed first to the dead waiter, whose short hand-off lease then lapses.
    expect(performance.now() - started).toBeLessThan(handoffLeaseMs * 4);
    expect(await handle.fence()).toBeGreaterThan(holderFence);
    await handle.release();
  });
});

describe('multi-key', () => {
  it('acquires all or nothing', async () => {
    const locks = service();
    const blocker = await locks.acquire('m:b');
    await expect(
      locks.acquire(['m:a', 'm:b', 'm:c'], { waitTime: 50 }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await locks.isLocked('m:a')).toBe(false);
    expect(await locks.isLocked('m:c')).toBe(false);
    await blocker.release();
    const all = await locks.acquire(['m:c', 'm:a', 'm:b']);
    expect(all.keys).toEqual(['m:a', 'm:b', 'm:c']);
    expect([...(await all.fences()).keys()]).toEqual(['m:a', 'm:b', 'm:c']);
    await all.release();
    expect(await redis.exists('lock:{m:a}', 'lock:{m:b}', 'lock:{m:c}')).toBe(
      0,
    );
  });

  it('never deadlocks when callers name the keys in opposite orders', async () => {
    const a = service();
    const b = service();
    let done = 0;
    await Promise.all([
      ...Array.from({ length: 30 }, () =>
        a.using(
          ['x', 'y'],
          async () => {
            await sleep(1);
            done++;
          },
          { waitTime: 20_000 },
        ),
      ),
      ...Array.from({ length: 30 }, () =>
        b.using(
          ['y', 'x'],
          async () => {
            await sleep(1);
            done++;
          },
          { waitTime: 20_000 },
        ),
      ),
    ]);
    expect(done).toBe(60);
  });
});
