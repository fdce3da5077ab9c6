import { once } from 'node:events';
import { Redis } from 'ioredis';
import { LockBackendError } from '../../src/errors/lock-errors.js';
import { RedisSemaphoreBackend } from '../../src/semaphore/redis/redis-semaphore-backend.js';
import type { SemaphoreRequest } from '../../src/semaphore/semaphore-backend.js';
import { pauseRedis } from '../../../../test/support/lock-fixtures.js';
import { blockUntilAnswersArrive } from '../../../../test/support/socket-queue.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

let server: RedisServerHandle;
let admin: Redis;
const opened: RedisSemaphoreBackend[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  admin = new Redis(server.url);
  await once(admin, 'ready');
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
  await admin.flushall();
});

afterAll(async () => {
  admin.disconnect();
  await server.stop();
});

function open(commandTimeoutMs: number): {
  backend: RedisSemaphoreBackend;
  client: Redis;
} {
  const client = new Redis(server.url);
  const backend = new RedisSemaphoreBackend({
    client,
    ownsClient: true,
    commandTimeoutMs,
  });
  opened.push(backend);
  return { backend, client };
}

function request(token: string, waitMs = 0): SemaphoreRequest {
  return {
    key: 'sem:{late}',
    name: 'late',
    token,
    permits: 1,
    limit: 1,
    leaseMs: 30_000,
    waitMs,
  };
}

describe('Redis semaphore backend: answers that come late', () => {
  it("an answer read after the process's own stall is not taken for a timeout", async () => {
    const { backend, client } = open(50);
    await client.ping(); // connected, scripts defined
    const acquiring = backend.acquire(request('stalled'));
    for (let i = 0; i < 20 && client.commandQueue.length === 0; i++)
      await Promise.resolve();
    expect(client.commandQueue.length).toBeGreaterThan(0);
    // Redis answers at once; nothing is read until the block ends, when the
    // call's time limit is overdue too.
    blockUntilAnswersArrive(200, [client]);
    await expect(acquiring).resolves.toMatchObject({ acquired: true });
  });

  it('gives back the permits of a try-once acquisition that timed out but was granted later', async () => {
    const { backend, client } = open(50);
    await client.ping();
    await pauseRedis(server.url, 300);
    await expect(backend.acquire(request('timed-out'))).rejects.toThrow(
      LockBackendError,
    );
    // Redis runs the acquisition once the pause ends; its permit must not
    // stay taken for the 30 s lease by a caller that was told it failed.
    const other = open(2_000).backend;
    await vi.waitFor(
      async () => {
        expect(await other.acquire(request('next'))).toMatchObject({
          acquired: true,
        });
      },
      { timeout: 2_000, interval: 50 },
    );
  });
});
