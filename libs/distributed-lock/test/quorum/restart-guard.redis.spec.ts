import { once } from 'node:events';
import { Redis } from 'ioredis';
import { RestartGuard } from '../../src/backends/quorum/restart-guard.js';
import { blockEventLoop } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

let server: RedisServerHandle;
let admin: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
  await once(admin, 'ready');
});

afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

describe('RestartGuard (quorum: a restarted node sits out)', () => {
  it("lets a reconnected node vote once its run_id answer is read, even after the process's own stall", async () => {
    const client = new Redis(server.url, { connectionName: 'guarded' });
    await once(client, 'ready');
    const guard = new RestartGuard([client], 1_000, 400);
    try {
      await vi.waitFor(() => expect(guard.counts(0)).toBe(true));
      // The guard's own 'ready' listener comes first and sends INFO server;
      // this one then blocks past the read's 400 ms before anything is read.
      const stalled = new Promise<void>((resolve) =>
        client.once('ready', () => {
          blockEventLoop(600);
          resolve();
        }),
      );
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await stalled;
      // Same run_id: the node votes again as soon as the answer is read,
      // not after a retry a read timeout (400 ms) later; 300 ms leave a busy
      // machine room to read it.
      await vi.waitFor(() => expect(guard.counts(0)).toBe(true), {
        timeout: 300,
        interval: 1,
      });
    } finally {
      guard.close();
      client.disconnect();
    }
  });
});
