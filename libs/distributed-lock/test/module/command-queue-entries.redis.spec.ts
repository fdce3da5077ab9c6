/**
 * The connections the module opens queue each command awaiting its reply in
 * an entry of the library's own class (see command-queue-entries.ts), and
 * ioredis handles those entries as its own: replies, and re-sending after a
 * dropped connection.
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { coalesceWrites } from '../../src/backends/redis/write-coalescing.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

let server: RedisServerHandle;
let client: Redis;
let restore: () => void;

beforeAll(async () => {
  server = await startRedisServer();
});

beforeEach(async () => {
  client = new Redis(server.url);
  await once(client, 'ready');
  restore = coalesceWrites(client);
});

afterEach(() => {
  restore();
  client.disconnect();
});

afterAll(async () => {
  await server.stop();
});

describe('command queue entries on the connections the module opens', () => {
  it('are not object literals, and carry the command, stream and database', async () => {
    const idle = client.set('entries:idle', '1');
    const busy = client.set('entries:busy', '2'); // sent while one awaits its reply
    const entries = client.commandQueue.toArray();
    expect(entries).toHaveLength(2);
    for (const entry of entries) {
      expect(Object.getPrototypeOf(entry)).not.toBe(Object.prototype);
      expect(entry.select).toBe(0);
      expect(entry.stream).toBeUndefined();
    }
    expect(entries.map((entry) => entry.command.name)).toEqual(['set', 'set']);
    expect(await Promise.all([idle, busy])).toEqual(['OK', 'OK']);
    expect(client.commandQueue.length).toBe(0);
  });

  it('are re-sent by ioredis after the connection drops with them in flight', async () => {
    const first = client.set('entries:first', '1');
    const second = client.set('entries:second', '2');
    expect(client.commandQueue.length).toBe(2);
    // Nothing is read before the socket goes: both replies are lost, and
    // ioredis sends both again on the next connection.
    client.stream.destroy();
    expect(await Promise.all([first, second])).toEqual(['OK', 'OK']);
    expect(await client.mget('entries:first', 'entries:second')).toEqual([
      '1',
      '2',
    ]);
  });
});
