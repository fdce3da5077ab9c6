/**
 * Semaphore permits and read-write lock holds are not bound to the process
 * session as mutex holds are: each hold's watchdog renews a lease of its own,
 * of the module's `sessionTtl`. Through the module and a real Redis: a
 * SIGKILLed process's permits and read lock come back within the configured
 * TTL, and with `sessionTtl: false` the holds keep a 5 s lease.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  ReadWriteLockService,
  SemaphoreService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import {
  startHolderProcess,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';

const PERMIT_HOLDER =
  'libs/distributed-lock/test/module/fixtures/module-permit-holder.ts';
const TTL_MS = 1_000;
/** A dead holder's lease ends within the TTL; then a retry and a round trip. */
const BOUND_MS = TTL_MS + 500;

let server: RedisServerHandle;
let observer: Redis;
const apps: INestApplicationContext[] = [];
const holders: LockHolder[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
});
afterEach(async () => {
  await Promise.all(holders.splice(0).map((holder) => holder.kill()));
  await Promise.all(apps.splice(0).map((app) => app.close()));
});
afterAll(async () => {
  observer.disconnect();
  await server.stop();
});

async function startModule(options: DistributedLockModuleOptions) {
  const app = await NestFactory.createApplicationContext(
    DistributedLockModule.forRoot(options),
    { logger: false },
  );
  apps.push(app);
  await app.init();
  return {
    semaphores: app.get(SemaphoreService),
    rwlocks: app.get(ReadWriteLockService),
  };
}

/** What is left of `token`'s lease in the store, by the server's clock. */
async function storedLeaseMs(storeKey: string, token: string): Promise<number> {
  const [end, [seconds, micros]] = await Promise.all([
    observer.zscore(`${storeKey}:holders`, token),
    observer.time(),
  ]);
  return Number(end) - (Number(seconds) * 1000 + Number(micros) / 1000);
}

/** Resolves how long after `since` (performance.now()) `pending` settled. */
const after = async (pending: Promise<unknown>, since: number) => {
  await pending;
  return performance.now() - since;
};

it('gives back the permits and the read lock of a SIGKILLed process within sessionTtl', async () => {
  const holder = startHolderProcess(PERMIT_HOLDER, {
    url: server.url,
    sessionTtl: TTL_MS,
    semaphore: 'partner-api',
    permits: 2,
    readLock: 'price:1',
  });
  holders.push(holder);
  const { semaphores, rwlocks } = await startModule({
    redis: server.url,
    sessionTtl: TTL_MS,
  });
  const acquired = await holder.waitFor('acquired', 30_000);
  // Held past two leases: its watchdog renews them.
  await sleep(TTL_MS * 2);
  expect(await semaphores.tryAcquire('partner-api', { limit: 2 })).toBeNull();
  expect(await rwlocks.tryWrite('price:1')).toBeNull();
  const lease = await storedLeaseMs(
    semaphores.storeKey('partner-api'),
    String(acquired.semaphoreToken),
  );
  expect(lease).toBeGreaterThan(0);
  expect(lease).toBeLessThanOrEqual(TTL_MS);

  const killedAt = performance.now();
  await holder.kill();
  const permits = semaphores.acquire('partner-api', {
    limit: 2,
    permits: 2,
    waitTime: 10_000,
  });
  const write = rwlocks.write('price:1', { waitTime: 10_000 });
  const waited = await Promise.all([
    after(permits, killedAt),
    after(write, killedAt),
  ]);
  for (const ms of waited) expect(ms).toBeLessThan(BOUND_MS);
  await (await permits).release();
  await (await write).release();
});

it('with sessionTtl: false, renews a 5 s lease per hold', async () => {
  const { semaphores, rwlocks } = await startModule({
    redis: server.url,
    sessionTtl: false,
  });
  const permit = await semaphores.acquire('fallback', { limit: 1 });
  const read = await rwlocks.read('fallback');
  for (const [storeKey, token] of [
    [semaphores.storeKey('fallback'), permit.token],
    [rwlocks.storeKey('fallback'), read.token],
  ]) {
    const lease = await storedLeaseMs(storeKey, token);
    expect(lease).toBeGreaterThan(4_000);
    expect(lease).toBeLessThanOrEqual(5_000);
  }
  await permit.release();
  await read.release();
});
