import { Redis } from 'ioredis';
import { ReadWriteLockService } from '../../src/rwlock/read-write-lock.service.js';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import {
  startHolderProcess,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';

const RWLOCK_HOLDER =
  'libs/distributed-lock/test/faults/workers/rwlock-holder.ts';

// The holders' watchdog lease: a dead or paused holder's lock comes back
// within it (plus the drift allowance and a round trip).
const LEASE_MS = 1_000;
const BOUND_MS = LEASE_MS + 500;

/** Sleeps until `at` (ms since epoch), if it is still ahead. */
const sleepUntil = (at: number) => sleep(Math.max(0, at - Date.now()));

describe('read-write lock faults (separate holder processes, one Redis)', () => {
  let server: RedisServerHandle;
  let client: Redis;
  let locks: ReadWriteLockService;
  const holders: LockHolder[] = [];
  // Started with the server, so that their start-up overlaps the first test.
  let killed: LockHolder;
  let paused: LockHolder;

  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    locks = new ReadWriteLockService({
      backend: new RedisSemaphoreBackend({ client }),
      keyPrefix: 'fault:',
      leaseTime: LEASE_MS,
      waitTime: 0,
      maxKeyLength: 200,
    });
    killed = start({ name: 'killed', mode: 'write' });
    paused = start({ name: 'paused', mode: 'read' });
  });
  afterAll(async () => {
    await Promise.all(holders.splice(0).map((holder) => holder.kill()));
    await locks.close();
    client.disconnect();
    await server.stop();
  });

  const start = (options: Record<string, unknown>) => {
    const holder = startHolderProcess(RWLOCK_HOLDER, {
      url: server.url,
      leaseTime: LEASE_MS,
      mode: 'read',
      ...options,
    });
    holders.push(holder);
    return holder;
  };

  it('never lets a writer overlap another holder across OS processes (fenced referee)', async () => {
    const referee = new FencedResource();
    const url = await referee.serve();
    try {
      const workers = [0, 1, 2].map(() =>
        start({
          name: 'churn',
          churn: { callers: 4, forMs: 1_200, referee: url },
        }),
      );
      // Generous: five processes start at once on two loaded cores.
      const done = await Promise.all(
        workers.map((w) => w.waitFor('done', 40_000)),
      );
      const writes = done.reduce((sum, d) => sum + Number(d.writes), 0);
      const reads = done.reduce((sum, d) => sum + Number(d.reads), 0);
      const byWriter = referee.overlapLog.filter(
        (o) =>
          o.writer.startsWith('w-') ||
          o.inside.some((i) => i.writer.startsWith('w-')),
      );
      expect(byWriter).toEqual([]);
      expect(referee.rejected).toBe(0);
      expect(referee.accepted).toBe(writes);
      expect(writes).toBeGreaterThan(5);
      expect(reads).toBeGreaterThan(10);
      // Readers did share the lock, across processes too.
      expect(referee.maxInside).toBeGreaterThan(1);
    } finally {
      await referee.close();
    }
  }, 50_000);

  it('gives back the lock of a SIGKILLed writer within its lease', async () => {
    const holder = killed;
    const acquired = await holder.waitFor('acquired');
    // Held well past its first lease: the watchdog renews it.
    await sleepUntil(acquired.at! + LEASE_MS * 2);
    expect(await locks.tryRead('killed')).toBeNull();
    const killedAt = performance.now();
    await holder.kill();
    const next = await locks.write('killed', { waitTime: 10_000 });
    expect(performance.now() - killedAt).toBeLessThan(BOUND_MS);
    expect(next.fencingToken).toBeGreaterThan(Number(acquired.fencingToken));
    await next.release();
  });

  it('lets a writer proceed past a paused reader, which is told lost on resuming', async () => {
    const holder = paused;
    const acquired = await holder.waitFor('acquired');
    // Renewed a few times before the pause: the lease it leaves is its own.
    await sleepUntil(acquired.at! + LEASE_MS);
    holder.pause();
    const pausedAt = performance.now();
    const next = await locks.write('paused', { waitTime: 10_000 });
    expect(performance.now() - pausedAt).toBeLessThan(BOUND_MS);
    // Paused well past its lease, then resumed.
    await sleep(LEASE_MS);
    holder.resume();
    const lost = await holder.waitFor('lost', 5_000);
    expect(String(lost.reason)).toContain('LockLostError');
    // Its renewals do not take the lock back from the writer.
    await sleep(LEASE_MS);
    expect(next.lost).toBe(false);
    expect(await next.extend(LEASE_MS)).toBe(true);
    await next.release();
  });
});
