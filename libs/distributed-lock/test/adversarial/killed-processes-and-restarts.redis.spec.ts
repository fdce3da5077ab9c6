/**
 * A holder SIGKILLed, and Redis restarted (and so emptied) under waiters.
 */
import { Redis } from 'ioredis';
import type { LockHandle } from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { spawnTs } from '../../../../test/support/processes.js';
import { startRedisServer } from '../../../../test/support/redis-server.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength } = fixture;

describe('killed processes and restarts', () => {
  it('waiters get the lock of a SIGKILLed holder within its lease, in order, with rising fences', async () => {
    const child = spawnTs(
      'libs/distributed-lock/test/workers/doomed-holder.ts',
      [fixture.server.url, 'killed-holder', '600'],
    );
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await eventually(() => out.includes('acquired'), 20_000);
    const services = [open({ handoffLeaseMs: 500 }), open(), open()];
    const order: number[] = [];
    const fences: number[] = [];
    const waits: Promise<void>[] = [];
    for (const [index, s] of services.entries()) {
      waits.push(
        s.locks.using(
          'killed-holder',
          async (lock) => {
            order.push(index);
            fences.push(await lock.fence());
          },
          { waitTime: 5_000 },
        ),
      );
      await eventually(
        async () => (await queueLength('killed-holder')) === index + 1,
      );
    }
    const killedHolderFence = Number(
      await fixture.redis.get('lock:{killed-holder}:fence'),
    );
    child.kill('SIGKILL');
    const killedAt = performance.now();
    await Promise.all(waits);
    expect(performance.now() - killedAt).toBeLessThan(600 + 3_000);
    expect(order).toEqual([0, 1, 2]);
    expect(fences[0]).toBeGreaterThan(killedHolderFence);
    expect(fences[1]).toBeGreaterThan(fences[0]);
    expect(fences[2]).toBeGreaterThan(fences[1]);
  });

  it('a waiter whose queue entry vanished in a restart queues again while others keep the key busy', async () => {
    const own = await startRedisServer();
    const probe = new Redis(own.url);
    probe.on('error', () => undefined);
    const stop = new AbortController();
    const busyLoops: Promise<void>[] = [];
    try {
      const settings = { url: own.url, handoffLeaseMs: 300 };
      const a = open(settings);
      const b = open(settings);
      const holder = open(settings);
      await holder.locks.acquire('vanished', { leaseTime: 10_000 });
      const waiting = a.locks
        .acquire('vanished', { waitTime: 4_000 })
        .catch((error: unknown) => error);
      await eventually(
        async () => (await probe.llen('lock:{vanished}:queue')) === 1,
      );
      await own.restart();
      const restartedAt = performance.now();
      // From now on b holds the key or has someone queued for it nearly always.
      for (let i = 0; i < 2; i++) {
        busyLoops.push(
          (async () => {
            while (!stop.signal.aborted) {
              await b.locks
                .using('vanished', () => sleep(20), { waitTime: 2_000 })
                .catch(() => sleep(20));
            }
          })(),
        );
      }
      const result = await waiting;
      expect(result).not.toBeInstanceOf(Error);
      expect(performance.now() - restartedAt).toBeLessThan(2_000);
      await (result as LockHandle).release();
    } finally {
      stop.abort();
      await Promise.all(busyLoops);
      probe.disconnect();
      await own.stop();
    }
  });

  // Redis here keeps no data across a restart, and the fencing counter goes
  // with it: tokens are seeded from the server clock so they still rise.
  it('fencing tokens keep rising across a Redis restart', async () => {
    const own = await startRedisServer();
    try {
      const { locks } = open({ url: own.url });
      let last = 0;
      for (let i = 0; i < 3; i++) {
        const handle = await locks.acquire('fence-restart');
        last = await handle.fence();
        await handle.release();
      }
      await own.restart();
      let after: LockHandle | undefined;
      await eventually(async () => {
        after = await locks
          .acquire('fence-restart', { waitTime: 0 })
          .catch(() => undefined);
        return after !== undefined;
      });
      expect(await after?.fence()).toBeGreaterThan(last);
    } finally {
      await own.stop();
    }
  });

  it('the blocking connection does not report unhandled errors while Redis is away', async () => {
    const own = await startRedisServer();
    const probe = new Redis(own.url);
    const errors = vi
      .spyOn(console, 'error')
      .mockImplementation(() => undefined);
    try {
      const a = open({ url: own.url, commandTimeoutMs: 300 });
      const b = open({ url: own.url, commandTimeoutMs: 300 });
      await a.locks.acquire('away', { leaseTime: 10_000 });
      const waiting = b.locks
        .acquire('away', { waitTime: 1_000 })
        .catch((error: unknown) => error);
      await eventually(
        async () => (await probe.llen('lock:{away}:queue')) === 1,
      );
      probe.disconnect();
      await own.stop();
      await sleep(500);
      await own.restart();
      await waiting;
      const unhandled = errors.mock.calls.filter((call) =>
        String(call[0]).includes('Unhandled error event'),
      );
      expect(unhandled).toEqual([]);
    } finally {
      probe.disconnect();
      await own.stop();
    }
  });
});
