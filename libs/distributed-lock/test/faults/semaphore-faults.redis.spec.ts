import { Redis } from 'ioredis';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import { SemaphoreService } from '../../src/semaphore/semaphore.service.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startHolderProcess,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';

const SEMAPHORE_HOLDER =
  'libs/distributed-lock/test/faults/workers/semaphore-holder.ts';

// The holders' watchdog lease: a dead or paused holder's permits come back
// within it (plus the drift allowance and a round trip).
const LEASE_MS = 1_000;
const BOUND_MS = LEASE_MS + 500;

describe('semaphore faults (separate holder processes, one Redis)', () => {
  let server: RedisServerHandle;
  let client: Redis;
  let semaphores: SemaphoreService;
  const holders: LockHolder[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    semaphores = new SemaphoreService({
      backend: new RedisSemaphoreBackend({ client }),
      keyPrefix: 'fault:',
      leaseTime: LEASE_MS,
      waitTime: 0,
      maxKeyLength: 200,
    });
  });
  afterEach(async () => {
    await Promise.all(holders.splice(0).map((holder) => holder.kill()));
  });
  afterAll(async () => {
    await semaphores.close();
    client.disconnect();
    await server.stop();
  });

  const start = (name: string, limit: number, permits: number) => {
    const holder = startHolderProcess(SEMAPHORE_HOLDER, {
      url: server.url,
      name,
      limit,
      permits,
      leaseTime: LEASE_MS,
    });
    holders.push(holder);
    return holder;
  };

  it('never lets more than N hold at once across OS processes', async () => {
    const workers = [0, 1, 2].map(() => {
      const worker = startHolderProcess(SEMAPHORE_HOLDER, {
        url: server.url,
        name: 'churn',
        limit: 3,
        permits: 1,
        leaseTime: LEASE_MS,
        churn: { callers: 6, forMs: 1_500 },
      });
      holders.push(worker);
      return worker;
    });
    const done = await Promise.all(workers.map((w) => w.waitFor('done')));
    const most = Math.max(...done.map((d) => Number(d.most)));
    const calls = done.reduce((sum, d) => sum + Number(d.calls), 0);
    expect(most).toBe(3);
    expect(calls).toBeGreaterThan(30);
  });

  it('returns the permits of a SIGKILLed holder within its lease', async () => {
    const holder = start('killed', 2, 2);
    await holder.waitFor('acquired');
    // Held well past its first lease: the watchdog renews it.
    await sleep(LEASE_MS * 2);
    expect(await semaphores.tryAcquire('killed', { limit: 2 })).toBeNull();
    const killedAt = performance.now();
    await holder.kill();
    const next = await semaphores.acquire('killed', {
      limit: 2,
      permits: 2,
      waitTime: 10_000,
    });
    const waited = performance.now() - killedAt;
    expect(waited).toBeLessThan(BOUND_MS);
    await next.release();
  });

  it('lets others proceed past a paused holder, which is told lost on resuming', async () => {
    const holder = start('paused', 1, 1);
    await holder.waitFor('acquired');
    holder.pause();
    const pausedAt = performance.now();
    const next = await semaphores.acquire('paused', {
      limit: 1,
      waitTime: 10_000,
    });
    expect(performance.now() - pausedAt).toBeLessThan(BOUND_MS);
    // Paused well past its lease, then resumed.
    await sleep(LEASE_MS);
    holder.resume();
    const lost = await holder.waitFor('lost', 5_000);
    expect(String(lost.reason)).toContain('LockLostError');
    // Its renewals do not take the permit back from the new holder.
    await sleep(LEASE_MS);
    expect(next.lost).toBe(false);
    expect(await next.extend(LEASE_MS)).toBe(true);
    await next.release();
  });
});
