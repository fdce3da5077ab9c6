import { Cluster } from 'ioredis';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../../test/support/redis-cluster.js';
import { describeReadWriteLockContract } from './rwlock-contract.js';

let cluster: RedisCluster | undefined;
let admin: Cluster | undefined;

// Each test's lock name is random, so the suite lands on every master.
describeReadWriteLockContract('Redis Cluster (3 masters)', {
  async setUp() {
    cluster = await startRedisCluster({ masters: 3 });
    admin = new Cluster(cluster.startupNodes);
    admin.on('error', () => undefined);
    await admin.ping();
  },
  async tearDown() {
    admin?.disconnect();
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
  async keysStartingWith(prefix) {
    const perMaster = await Promise.all(
      admin!.nodes('master').map((node) => node.keys(`${prefix}*`)),
    );
    return perMaster.flat();
  },
});
