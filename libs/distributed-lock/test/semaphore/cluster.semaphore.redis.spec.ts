import { Cluster } from 'ioredis';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../../test/support/redis-cluster.js';
import { describeSemaphoreContract } from './semaphore-contract.js';

let cluster: RedisCluster | undefined;

// Each test's semaphore name is random, so the suite lands on every master.
describeSemaphoreContract('Redis Cluster (3 masters)', {
  async setUp() {
    cluster = await startRedisCluster({ masters: 3 });
  },
  async tearDown() {
    await cluster?.stop();
  },
  async open(count) {
    const backends = Array.from({ length: count }, () => {
      const client = new Cluster(cluster!.startupNodes, {
        redisOptions: { maxRetriesPerRequest: 1 },
      });
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
