import { once } from 'node:events';

import { Redis } from 'ioredis';

import { blockEventLoopUntil } from './lock-fixtures.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';
import { unreadBytes } from './socket-queue.js';

let server: RedisServerHandle;

beforeAll(async () => {
  server = await startRedisServer();
});

afterAll(async () => {
  await server.stop();
});

it('counts an answer that reached the socket while the event loop was blocked, and none once it is read', async () => {
  const client = new Redis(server.url);
  try {
    await once(client, 'ready');
    const port = client.stream.localPort;
    if (port === undefined) throw new Error('no local port');
    expect(unreadBytes(port)).toBe(0);

    const pong = client.ping('unread');
    blockEventLoopUntil(0, () => (unreadBytes(port) ?? 0) > 0, 5_000);
    // `$6\r\nunread\r\n`: the whole answer, none of it read yet.
    expect(unreadBytes(port)).toBe(12);

    await expect(pong).resolves.toBe('unread');
    expect(unreadBytes(port)).toBe(0);
  } finally {
    client.disconnect();
  }
});

it('knows no socket on a port nothing here is bound to', () => {
  expect(unreadBytes(1)).toBeUndefined();
});

it('gives up blocking after maxMs when the condition never holds', () => {
  expect(() => blockEventLoopUntil(10, () => false, 50)).toThrow(
    /blocked \d+ ms and still waiting/,
  );
});
