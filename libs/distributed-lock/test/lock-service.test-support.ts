/**
 * Shared by the lock-service-*.redis.spec.ts files: a `redis-server` per spec
 * file, a plain client of it for looking at keys, and lock services closed
 * (and the keys flushed) after each test. Excluded from the builds by its
 * *.test-support.ts name.
 */
import { Redis } from 'ioredis';
import type { LockService } from '@app/distributed-lock';
import { createLockService } from '../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';

// Set by the hooks useLockServiceRedis registers; read them inside tests.
export let server: RedisServerHandle;
export let redis: Redis;
/** Closers of what a test opened, run after the test. */
export const opened: Array<() => Promise<void>> = [];

/** A lock service on the spec file's server, closed after the test. */
export function service(
  settings: Parameters<typeof createLockService>[1] = {},
): LockService {
  const created = createLockService(server.url, settings);
  opened.push(created.close);
  return created.locks;
}

/** Registers the set-up's hooks in the calling spec file. */
export function useLockServiceRedis(): void {
  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((close) => close()));
    await redis.flushall();
  });

  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });
}
