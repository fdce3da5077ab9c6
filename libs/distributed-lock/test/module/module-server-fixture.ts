/**
 * The set-up of the module specs split from module-config.spec.ts: one
 * redis-server per spec file, a client for looking at it (the data flushed
 * after each test), and application contexts closed after each test.
 */
import type { ModuleMetadata } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { otherConnections, useAppContexts } from './module-helpers.js';

export interface ModuleServerFixture {
  /** The spec file's `redis-server`. */
  readonly server: RedisServerHandle;
  /** A plain client of the server, for looking at keys and connections. */
  readonly observer: Redis;
  /** How many connections the server has besides `redis`'s own. */
  connectionCount(redis?: Redis): Promise<number>;
  /** Starts an application context, closed after the test if still open. */
  start(metadata: ModuleMetadata): Promise<TestingModule>;
  stop(app: TestingModule): Promise<void>;
}

/**
 * Registers the hooks of the set-up in the calling spec file and returns its
 * parts. `clear` empties the server after each test (default: FLUSHALL).
 */
export function useModuleServer(
  clear: (observer: Redis) => Promise<unknown> = (observer) =>
    observer.flushall(),
): ModuleServerFixture {
  let server: RedisServerHandle;
  let observer: Redis;
  const connectionCount = async (redis: Redis = observer) =>
    (await otherConnections(redis)).length;

  beforeAll(async () => {
    server = await startRedisServer();
    observer = new Redis(server.url);
  });

  afterEach(async () => {
    await clear(observer);
  });

  // Registered after the flush: hooks run last-registered first, so the apps a
  // test left open are closed before Redis is flushed.
  const { start, stop } = useAppContexts();

  afterAll(async () => {
    observer.disconnect();
    await server.stop();
  });

  return {
    get server() {
      return server;
    },
    get observer() {
      return observer;
    },
    connectionCount,
    start,
    stop,
  };
}
