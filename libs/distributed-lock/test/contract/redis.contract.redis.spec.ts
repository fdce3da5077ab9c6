import { Redis } from 'ioredis';
import { RedisLockBackend } from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { describeBackendContract } from './backend-contract.js';

// One throwaway redis-server for the file; every "process" is a backend on
// its own connection (and so its own wake list and blocking connection).
let server: RedisServerHandle | undefined;
let admin: Redis | undefined;

describeBackendContract('single-node Redis', {
  capabilities: {
    fifo: 'strict',
    unreachable: true,
    sharedInstance: false,
    sessions: true,
  },
  async setUp() {
    server = await startRedisServer();
    admin = new Redis(server.url);
    admin.on('error', () => undefined);
  },
  async tearDown() {
    admin?.disconnect();
    await server?.stop();
  },
  async open(count, options = {}) {
    const backends = Array.from({ length: count }, () => {
      const client = new Redis(server!.url, { maxRetriesPerRequest: 1 });
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
    await admin?.flushall();
  },
  // Stops the server (connections refused); it comes back empty.
  async cutOff() {
    await server!.stop();
    return () => server!.restart();
  },
});
