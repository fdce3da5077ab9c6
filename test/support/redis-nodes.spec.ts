import net from 'node:net';

import { Redis } from 'ioredis';

import { eventually } from './lock-fixtures.js';
import { isProcessGone } from './process-state.js';
import { runTs } from './processes.js';
import { startRedisNodes, type RedisNodes } from './redis-nodes.js';

const clients: Redis[] = [];

function connect(url: string): Redis {
  const client = new Redis(url, {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

describe('redis-nodes test helper', () => {
  let nodes: RedisNodes;

  beforeEach(async () => {
    nodes = await startRedisNodes(3);
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) client.disconnect();
    await nodes.stop();
  });

  it('starts independent servers on free loopback ports', async () => {
    expect(nodes.servers).toHaveLength(3);
    const ports = nodes.servers.map((server) => server.port);
    expect(new Set(ports).size).toBe(3);
    expect(ports).not.toContain(6379);
    expect(nodes.urls).toEqual(
      ports.map((port) => `redis://127.0.0.1:${port}`),
    );

    const [first, second, third] = nodes.urls.map(connect);
    await first.set('lock', 'on the first only');
    expect(await first.get('lock')).toBe('on the first only');
    expect(await second.get('lock')).toBeNull();
    expect(await third.get('lock')).toBeNull();
    expect(await second.info('replication')).toContain('connected_slaves:0');
  });

  it('kills one server with SIGKILL and restarts it empty on the same port', async () => {
    const [first, second] = nodes.urls.map(connect);
    await first.set('survives', 'no');
    await second.set('untouched', 'yes');
    const pid = nodes.servers[0].pid()!;

    await nodes.kill(0);
    expect(isProcessGone(pid)).toBe(true);
    expect(nodes.servers[0].pid()).toBeUndefined();
    expect(await canBind(nodes.servers[0].port)).toBe(true);
    expect(await second.get('untouched')).toBe('yes');

    await nodes.restart(0);
    expect(nodes.servers[0].pid()).not.toBe(pid);
    expect(await connect(nodes.urls[0]).get('survives')).toBeNull();

    await nodes.restart(1); // a running one, too
    expect(await connect(nodes.urls[1]).get('untouched')).toBeNull();
    await expect(nodes.kill(3)).rejects.toThrow(RangeError);
  });

  it('stops every server', async () => {
    const pids = nodes.servers.map((server) => server.pid()!);
    await nodes.stop();
    for (const [i, pid] of pids.entries()) {
      expect(isProcessGone(pid)).toBe(true);
      expect(await canBind(nodes.servers[i].port)).toBe(true);
    }
    await nodes.stop();
  });

  it('takes server options', async () => {
    await nodes.stop();
    nodes = await startRedisNodes(2, { password: 'quorum' });
    expect(nodes.urls.every((url) => url.startsWith('redis://:quorum@'))).toBe(
      true,
    );
    expect(await connect(nodes.urls[1]).ping()).toBe('PONG');
    await expect(startRedisNodes(0)).rejects.toThrow(RangeError);
  });
});

it('kills servers left running when the process exits', async () => {
  const stdout = await runTs('test/support/workers/forgotten-ha.ts', ['nodes']);
  const { pids } = JSON.parse(stdout) as { pids: number[] };
  expect(pids).toHaveLength(2);
  for (const pid of pids) await eventually(() => isProcessGone(pid), 2_000);
});
