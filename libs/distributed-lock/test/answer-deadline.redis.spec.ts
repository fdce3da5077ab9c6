import { once } from 'node:events';
import { Redis } from 'ioredis';
import {
  answerWithin,
  settlesWithin,
} from '../src/backends/answer-deadline.js';
import { pauseRedis } from '../../../test/support/lock-fixtures.js';
import { blockUntilAnswersArrive } from '../../../test/support/socket-queue.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';

let server: RedisServerHandle;
let client: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  client = new Redis(server.url);
  await once(client, 'ready');
});

afterAll(async () => {
  client.disconnect();
  await server.stop();
});

describe('settlesWithin (the patience of shutdowns and drains)', () => {
  it("counts an answer read after the process's own stall as in time", async () => {
    const answered = settlesWithin(client.ping(), 50);
    // PING is on the wire; its answer is read only after the block, when
    // the 50 ms are overdue too.
    blockUntilAnswersArrive(200, [client]);
    expect(await answered).toBe(true);
  });

  it('gives up on an answer that does not come in time', async () => {
    try {
      await pauseRedis(server.url, 300);
      expect(await settlesWithin(client.ping(), 50)).toBe(false);
    } finally {
      await client.ping(); // answered once the pause is over
    }
  });
});

describe('answerWithin (the time limit of startup checks and health calls)', () => {
  it("takes an answer read after the process's own stall", async () => {
    const answer = answerWithin(client.ping(), 50);
    blockUntilAnswersArrive(200, [client]);
    expect(await answer).toBe('PONG');
  });

  it('rejects with the limit once it passed without an answer', async () => {
    try {
      await pauseRedis(server.url, 300);
      await expect(answerWithin(client.ping(), 50)).rejects.toThrow(
        'no answer within 50 ms',
      );
    } finally {
      await client.ping(); // answered once the pause is over
    }
  });
});
