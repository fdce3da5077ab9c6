import { Redis } from 'ioredis';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { describeSemaphoreContract } from './semaphore-contract.js';

let server: RedisServerHandle | undefined;

describeSemaphoreContract('single-node Redis', {
  async setUp() {
    server = await startRedisServer();
  },
  async tearDown() {
    await server?.stop();
  },
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
});
