import { Cluster, Redis } from 'ioredis';
import { RedisLockBackend } from '@app/distributed-lock';
import {
  startRedisCluster,
  type RedisCluster,
} from '../../../../test/support/redis-cluster.js';
import { describeBackendContract } from './backend-contract.js';

// One throwaway 3-master Redis Cluster for the file; every "process" is a
// backend on its own Cluster connection (and so its own wake channels).
let cluster: RedisCluster | undefined;

describeBackendContract('Redis Cluster (3 masters)', {
  capabilities: {
    fifo: 'strict',
    unreachable: true,
    sharedInstance: false,
    sessions: true,
  },
  async setUp() {
    cluster = await startRedisCluster({ masters: 3 });
  },
  async tearDown() {
    await cluster?.stop();
  },
  async open(count, options = {}) {
    const backends = Array.from({ length: count }, () => {
      const client = new Cluster(cluster!.startupNodes, {
        redisOptions: { maxRetriesPerRequest: 1 },
      });
      client.on('error', () => undefined);
      return new RedisLockBackend({
        client,
        ownsClient: true,
        commandTimeoutMs: 500,
        localHandoffs: options.localHandoffs,
      });
    });
    return {
      backends,
      close: async () => {
        await Promise.all(backends.map((backend) => backend.close()));
      },
    };
  },
  async reset() {
    await Promise.all(
      cluster!.masters.map(async (master) => {
        const admin = new Redis(master.port, master.host);
        await admin.flushall();
        admin.disconnect();
      }),
    );
  },
  // Freezes every node (SIGSTOP): commands go unanswered until they thaw.
  async cutOff() {
    await Promise.all(cluster!.nodes.map((node) => node.server.freeze()));
    return async () => {
      await Promise.all(cluster!.nodes.map((node) => node.server.thaw()));
    };
  },
});
