import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';

import { Redis } from 'ioredis';

import { blockEventLoopUntil } from './lock-fixtures.js';
import { getFreePort } from './ports.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';
import {
  blockUntilAnswersArrive,
  hexPort,
  unreadBytes,
} from './socket-queue.js';

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
    const { localPort, remotePort } = client.stream;
    if (localPort === undefined || remotePort === undefined)
      throw new Error('not connected');
    expect(unreadBytes(localPort, remotePort)).toBe(0);

    const pong = client.ping('unread');
    blockUntilAnswersArrive(0, [client]);
    // `$6\r\nunread\r\n`: the whole answer, none of it read yet.
    expect(unreadBytes(localPort, remotePort)).toBe(12);

    await expect(pong).resolves.toBe('unread');
    expect(unreadBytes(localPort, remotePort)).toBe(0);
  } finally {
    client.disconnect();
  }
});

it('tells the live connection from a closed one that used the same local port', async () => {
  // A connection from `port` that this side closed first lingers in
  // TIME_WAIT; a new one from the same port goes to Redis.
  const listener = net.createServer((socket) => socket.resume());
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const port = await getFreePort();
  const closed = net.connect({
    host: '127.0.0.1',
    port: (listener.address() as net.AddressInfo).port,
    localPort: port,
  });
  await once(closed, 'connect');
  closed.end();
  await once(closed, 'close');
  listener.close();

  const live = net.connect({
    host: '127.0.0.1',
    port: server.port,
    localPort: port,
  });
  try {
    await once(live, 'connect');
    // Both are listed under the port: the old one, and this one.
    const fromPort = readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .filter((line) =>
        line
          .trim()
          .split(/\s+/)[1]
          ?.endsWith(`:${hexPort(port)}`),
      );
    expect(fromPort.length).toBe(2);
    live.write('PING\r\n');
    blockEventLoopUntil(
      0,
      () => (unreadBytes(port, server.port) ?? 0) > 0,
      5_000,
    );
    expect(unreadBytes(port, server.port)).toBe('+PONG\r\n'.length);
  } finally {
    live.destroy();
  }
});

it('knows no connection between ports nothing here uses', () => {
  expect(unreadBytes(1, 2)).toBeUndefined();
});

it('gives up blocking after maxMs when the condition never holds', () => {
  expect(() => blockEventLoopUntil(10, () => false, 50)).toThrow(
    /blocked \d+ ms and still waiting for the condition/,
  );
});
