import net from 'node:net';

import { Redis, type RedisOptions } from 'ioredis';

import { eventually, sleep } from './lock-fixtures.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** Counts of the handle types a proxy uses (listener and sockets). */
function tcpHandles(): { servers: number; sockets: number } {
  const info = process.getActiveResourcesInfo();
  return {
    servers: info.filter((name) => name === 'TCPServerWrap').length,
    sockets: info.filter((name) => name === 'TCPSocketWrap').length,
  };
}

/** Whether a connection to `port` is refused (nothing listens there). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

/** Counts the client's reconnections. */
function reconnections(redis: Redis): { count: number } {
  const seen = { count: 0 };
  redis.on('reconnecting', () => seen.count++);
  return seen;
}

describe('tcp-proxy test helper', () => {
  let server: RedisServerHandle;
  let direct: Redis;
  let proxy: TcpProxy;
  const clients: Redis[] = [];

  /** A client through the proxy that reconnects quickly and forever. */
  function connect(options: RedisOptions = {}): Redis {
    const redis = new Redis(proxy.url, {
      retryStrategy: () => 20,
      maxRetriesPerRequest: null,
      ...options,
    });
    redis.on('error', () => undefined);
    clients.push(redis);
    return redis;
  }

  beforeAll(async () => {
    server = await startRedisServer();
    direct = new Redis(server.url);
  });

  afterAll(async () => {
    direct.disconnect();
    await server.stop();
  });

  beforeEach(async () => {
    proxy = await startTcpProxy({ targetPort: server.port });
    await direct.flushall();
  });

  afterEach(async () => {
    for (const redis of clients.splice(0)) redis.disconnect();
    await proxy.close();
  });

  it('forwards commands and counts its connections', async () => {
    expect(proxy.url).toBe(`redis://127.0.0.1:${proxy.port}`);
    expect(proxy.port).not.toBe(server.port);
    expect(proxy.connections).toBe(0);
    const redis = connect();
    await redis.set('through', 'proxy');
    expect(await redis.get('through')).toBe('proxy');
    expect(await direct.get('through')).toBe('proxy');
    expect(proxy.connections).toBe(1);
    redis.disconnect();
    await eventually(() => proxy.connections === 0);
  });

  it('cutAfterRequest: the command runs, its reply is lost, ioredis re-sends it', async () => {
    const redis = connect();
    await redis.ping();
    const seen = reconnections(redis);

    const cut = proxy.cutAfterRequest('INCR');
    const reply = redis.incr('n');
    await cut;
    // Applied once before the cut and once more when re-sent.
    expect(await reply).toBe(2);
    expect(await direct.get('n')).toBe('2');
    expect(seen.count).toBeGreaterThanOrEqual(1);
  });

  it('cutAfterRequest matches only the chosen request', async () => {
    const redis = connect();
    await redis.ping();
    const cut = proxy.cutAfterRequest(/\$3\r\nbbb/);
    expect(await redis.set('aaa', '1')).toBe('OK');
    const reply = redis.set('bbb', '2');
    await cut;
    expect(await reply).toBe('OK');
    expect(await direct.get('bbb')).toBe('2');
  });

  it('a cut resolves when the connection goes sooner, after its request was sent', async () => {
    const redis = connect();
    await redis.ping();
    const cut = proxy.cutAfterRequest('INCR', { afterMs: 10_000 });
    const reply = redis.incr('m');
    await eventually(async () => (await direct.get('m')) === '1');
    proxy.cutAll();
    await cut;
    expect(await reply).toBe(2);
  });

  it('passes on a server closing the connection: the client reconnects', async () => {
    const redis = connect();
    await redis.ping();
    const seen = reconnections(redis);
    await direct.call('CLIENT', 'KILL', 'SKIPME', 'yes', 'TYPE', 'normal');
    await eventually(() => seen.count >= 1);
    expect(await redis.ping()).toBe('PONG');
    expect(proxy.connections).toBe(1);
  });

  it('dropReplies: the command times out though the server applied it', async () => {
    const redis = connect({ commandTimeout: 200 });
    await redis.ping();
    proxy.dropReplies(true);
    await expect(redis.set('dropped', 'yes')).rejects.toThrow(/timed out/i);
    expect(await direct.get('dropped')).toBe('yes');

    proxy.dropReplies(false);
    proxy.cutAll(); // the connection lost a reply: start a fresh one
    expect(await redis.ping()).toBe('PONG');
  });

  it('freeze holds an answer back until thaw', async () => {
    const redis = connect();
    await redis.set('k', 'v');
    proxy.freeze();
    let settled = false;
    const reply = redis.get('k').finally(() => (settled = true));
    await sleep(200);
    expect(settled).toBe(false);
    expect(proxy.connections).toBe(1);
    proxy.thaw();
    expect(await reply).toBe('v');
  });

  it('delay holds every chunk in both directions', async () => {
    const redis = connect();
    await redis.ping();
    proxy.delay(100);
    const started = performance.now();
    expect(await redis.ping()).toBe('PONG');
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    proxy.delay(0);
    const again = performance.now();
    await redis.ping();
    expect(performance.now() - again).toBeLessThan(180);
  });

  it('cutAll makes the client reconnect', async () => {
    const redis = connect();
    await redis.ping();
    const seen = reconnections(redis);
    proxy.cutAll();
    expect(proxy.connections).toBe(0);
    await eventually(() => seen.count >= 1);
    expect(await redis.ping()).toBe('PONG');
    expect(proxy.connections).toBe(1);
  });

  it('refuse keeps the client from reconnecting until turned off', async () => {
    const redis = connect();
    await redis.ping();
    proxy.refuse(true);
    proxy.cutAll();
    let settled = false;
    const reply = redis.ping().finally(() => (settled = true));
    await sleep(300);
    expect(settled).toBe(false);
    expect(redis.status).not.toBe('ready');
    expect(proxy.connections).toBe(0);
    proxy.refuse(false);
    expect(await reply).toBe('PONG');
  });

  it('close leaves no open handles and is idempotent', async () => {
    await proxy.close();
    const before = tcpHandles();
    proxy = await startTcpProxy({ targetPort: server.port });
    const redis = connect({ retryStrategy: () => null });
    await redis.ping();
    const frozenReply = (proxy.freeze(), redis.ping());
    frozenReply.catch(() => undefined);
    const pendingCut = expect(
      proxy.cutAfterRequest('never-sent'),
    ).rejects.toThrow(/closed/);

    await proxy.close();
    await proxy.close();
    await pendingCut;
    await expect(frozenReply).rejects.toThrow();
    expect(proxy.connections).toBe(0);
    expect(await refused(proxy.port)).toBe(true);
    await eventually(() => redis.status === 'end');
    await eventually(() => {
      const after = tcpHandles();
      return (
        after.servers === before.servers && after.sockets === before.sockets
      );
    });
  });
});
