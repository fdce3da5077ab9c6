/**
 * The single-node lock on Redis Cluster: every script stays in its lock's
 * slot, hand-offs wake waiters through the lock's shard channel, and a
 * multi-key lock may span slots.
 */
import { Cluster } from 'ioredis';
import { LockNotAcquiredError } from '../../src/errors/lock-errors.js';
import { RedisLockBackend } from '../../src/backends/redis/redis-lock-backend.js';
import { LockService } from '../../src/lock-service/lock.service.js';
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../../test/support/redis-cluster.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';

let cluster: RedisCluster;
const opened: LockService[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((locks) => locks.close()));
});
afterAll(async () => {
  await cluster?.stop();
});

/** A service on its own Cluster connection (a "process"). */
function open(handoffLeaseMs = 3000, keyPrefix?: string): LockService {
  const client = new Cluster(cluster.startupNodes, {
    redisOptions: { maxRetriesPerRequest: 1 },
    keyPrefix,
  });
  client.on('error', () => undefined);
  const backend = new RedisLockBackend({
    client,
    ownsClient: true,
    handoffLeaseMs,
  });
  const locks = new LockService({
    backend,
    keyPrefix: 'lock:',
    watchdogLeaseTime: 10_000,
    waitTime: 5_000,
    maxKeyLength: 512,
  });
  opened.push(locks);
  return locks;
}

it('wakes a waiter in another process through the shard channel, not the safety check', async () => {
  // A safety check would come only after the 20 s hand-off lease.
  const [a, b] = [open(20_000), open(20_000)];
  const held = await a.acquire('coupon:1');
  const first = await held.fence();
  const waiting = b.acquire('coupon:1');
  await sleep(100);
  const releasedAt = performance.now();
  await held.release();
  const next = await waiting;
  expect(performance.now() - releasedAt).toBeLessThan(500);
  expect(await next.fence()).toBeGreaterThan(first);
  await next.release();
});

it('wakes a waiter through the shard channel when the client has a keyPrefix', async () => {
  const [a, b] = [open(20_000, 'app:'), open(20_000, 'app:')];
  const held = await a.acquire('prefixed');
  const waiting = b.acquire('prefixed');
  await sleep(100);
  const releasedAt = performance.now();
  await held.release();
  await (await waiting).release();
  expect(performance.now() - releasedAt).toBeLessThan(500);
});

it('serves waiters of several processes in arrival order', async () => {
  const [holder, ...others] = [open(), open(), open(), open()];
  const held = await holder.acquire('ordered');
  const order: number[] = [];
  const waits = others.map(async (locks, i) => {
    await sleep(30 * i);
    const handle = await locks.acquire('ordered');
    order.push(i);
    await sleep(5);
    await handle.release();
  });
  await sleep(150);
  await held.release();
  await Promise.all(waits);
  expect(order).toEqual([0, 1, 2]);
});

it('takes a multi-key lock across slots all or nothing', async () => {
  const keys = ['alpha', 'bravo', 'charlie', 'delta'];
  const slots = new Set(keys.map((key) => cluster.slotOf(`lock:{${key}}`)));
  expect(slots.size).toBeGreaterThan(2);
  const [a, b] = [open(), open()];
  const one = await b.acquire('charlie');
  await expect(a.acquire(keys, { waitTime: 0 })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  for (const key of ['alpha', 'bravo', 'delta'])
    expect(await a.isLocked(key)).toBe(false);
  await one.release();
  const all = await a.acquire(keys, { waitTime: 0 });
  for (const key of keys) expect(await b.isLocked(key)).toBe(true);
  await all.release();
  for (const key of keys) expect(await b.isLocked(key)).toBe(false);
});
