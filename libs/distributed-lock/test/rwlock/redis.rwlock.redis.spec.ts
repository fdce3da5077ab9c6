import { Redis } from 'ioredis';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import { MAX_READERS } from '../../src/rwlock/read-write-lock.service.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { describeReadWriteLockContract } from './rwlock-contract.js';

let server: RedisServerHandle | undefined;
let admin: Redis | undefined;

// One server for the whole file: the contract, then the store's own checks.
beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

describeReadWriteLockContract('single-node Redis', {
  async open(count) {
    const backends = Array.from({ length: count }, () => {
      const client = new Redis(server!.url, { maxRetriesPerRequest: 1 });
      client.on('error', () => undefined);
      return new RedisSemaphoreBackend({
        client,
        ownsClient: true,
        commandTimeoutMs: 1_000,
      });
    });
    return {
      backends,
      close: async () => {
        await Promise.all(backends.map((backend) => backend.close()));
      },
    };
  },
  keysStartingWith: (prefix) => admin!.keys(`${prefix}*`),
});

describe('read-write lock store on Redis: a grant asked for again', () => {
  it('answers the fencing token issued with the grant, not a new one', async () => {
    const backend = new RedisSemaphoreBackend({
      client: new Redis(server!.url, { maxRetriesPerRequest: 1 }),
      ownsClient: true,
    });
    const request = {
      key: 'resend:rw:{price}',
      name: 'price',
      token: 'writer-token-0123456789abcdef',
      permits: MAX_READERS,
      limit: MAX_READERS,
      leaseMs: 5_000,
      waitMs: 0,
      fence: true,
    };
    try {
      const first = await backend.acquire(request);
      // The same request again, as after an answer lost on the way back.
      const again = await backend.acquire(request);
      expect(first).toMatchObject({ acquired: true });
      expect(again).toMatchObject({
        acquired: true,
        fencingToken: (first as { fencingToken: number }).fencingToken,
      });
      expect(await backend.release(request.key, request.token)).toBe(true);
      const next = await backend.acquire({ ...request, token: 'next-token' });
      expect((next as { fencingToken: number }).fencingToken).toBeGreaterThan(
        (first as { fencingToken: number }).fencingToken,
      );
    } finally {
      await backend.close();
    }
  });
});
