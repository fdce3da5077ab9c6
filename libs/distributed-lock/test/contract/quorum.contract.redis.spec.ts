import { Redis } from 'ioredis';
import { QuorumLockBackend } from '@app/distributed-lock';
import {
  startRedisNodes,
  type RedisNodes,
} from '../../../../test/support/redis-nodes.js';
import { describeBackendContract } from './backend-contract.js';

// Three throwaway independent servers for the file; every "process" is a
// quorum backend with its own connection to each.
let nodes: RedisNodes | undefined;

describeBackendContract('Redlock quorum (3 nodes)', {
  capabilities: {
    fifo: 'approximate',
    unreachable: true,
    sharedInstance: false,
    sessions: true,
  },
  async setUp() {
    nodes = await startRedisNodes(3);
  },
  async tearDown() {
    await nodes?.stop();
  },
  async open(count) {
    const backends = Array.from({ length: count }, () => {
      const clients = nodes!.urls.map((url) => {
        const client = new Redis(url, { maxRetriesPerRequest: 1 });
        client.on('error', () => undefined);
        return client;
      });
      // Nodes restarted by cutOff() stay out of the vote for maxLeaseMs (the
      // delayed-restart rule): short here, so the store is back within the test.
      return new QuorumLockBackend({
        nodes: clients,
        ownsClients: true,
        maxLeaseMs: 1000,
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
      nodes!.urls.map(async (url) => {
        const admin = new Redis(url);
        await admin.flushall();
        admin.disconnect();
      }),
    );
  },
  // Stops every node (connections refused); they come back empty.
  async cutOff() {
    await Promise.all(nodes!.servers.map((server) => server.stop()));
    return async () => {
      await Promise.all(nodes!.servers.map((server) => server.restart()));
    };
  },
});
