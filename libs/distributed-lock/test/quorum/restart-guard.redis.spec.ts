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
    const guard = new RestartGuard([client], 1_000, 1_000);
    try {
      await vi.waitFor(() => expect(guard.counts(0)).toBe(true));
      // The guard's own 'ready' listener comes first and sends INFO server;
      // this one then blocks past the read's 1,000 ms before anything is
      // read. The block is long so that a busy machine still answers within
      // it: at a 400 ms limit and a 600 ms block, two of six runs beside
      // three busy loops on two cores failed (eight of eight pass now).
      const stalled = new Promise<void>((resolve) =>
        client.once('ready', () => {
          blockEventLoop(1_200);
          resolve();
        }),
      );
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await stalled;
      // Same run_id: the node votes again as soon as the answer is read,
      // not after a retry a read timeout (1,000 ms) later; 800 ms leave a
      // busy machine room to read it.
      await vi.waitFor(() => expect(guard.counts(0)).toBe(true), {
        timeout: 800,
        interval: 1,
      });
    } finally {
      guard.close();
      client.disconnect();
    }
  });
});
