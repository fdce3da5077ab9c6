import { once } from 'node:events';
import { Redis } from 'ioredis';
import {
  ProbedScripts,
  probeRedisNode,
} from '../src/backends/redis/node-probe.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { pauseRedis } from '../../../test/support/lock-fixtures.js';
import { blockUntilAnswersArrive } from '../../../test/support/socket-queue.js';

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

describe('probeRedisNode (the health check of one Redis)', () => {
  it('reports a node up that answered in time while the probing process was stalled past the limit', async () => {
    const lua = "return 'probe'";
    // Cached already: the probe's calls are then all sent before the block.
    await client.script('LOAD', lua);
    const scripts = new ProbedScripts([lua]);
    const probing = probeRedisNode(client, scripts, 50);
    // PING and SCRIPT EXISTS are on the wire; Redis answers at once, but
    // nothing is read until the block ends, when the limit is overdue too.
    // `+PONG` and `*1 :1`, 15 bytes.
    blockUntilAnswersArrive(200, [client], { minBytes: 15 });
    const health = await probing;
    expect(health.message).toBeUndefined();
    expect(health.up).toBe(true);
    expect(health.scriptsLoaded).toBe(true);
  });

  it('reports a node down that did not answer within the limit', async () => {
    try {
      await pauseRedis(server.url, 300);
      const health = await probeRedisNode(client, new ProbedScripts([]), 50);
      expect(health.up).toBe(false);
      expect(health.message).toContain('no answer within 50 ms');
    } finally {
      await client.ping(); // answered once the pause is over
    }
  });

  it("words the client's own commandTimeout like its limit: no answer within that time", async () => {
    // The client gives up on PING at the same moment as the probe, as an
    // app's client does whose commandTimeout is the health check's limit.
    const timed = new Redis(server.url, { commandTimeout: 50 });
    try {
      await once(timed, 'ready');
      await pauseRedis(server.url, 300);
      const health = await probeRedisNode(timed, new ProbedScripts([]), 50);
      expect(health.up).toBe(false);
      expect(health.message).toBe('no answer within 50 ms');
    } finally {
      timed.disconnect();
      await client.ping(); // answered once the pause is over
    }
  });
});
