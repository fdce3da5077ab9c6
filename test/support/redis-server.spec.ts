import net from 'node:net';

import { Redis, type RedisOptions } from 'ioredis';

import { eventually, sleep } from './lock-fixtures.js';
import { isProcessGone, isProcessStopped } from './process-state.js';
import { runTs } from './processes.js';

import {
  redisServerBinary,
  startRedisServer,
  type RedisServerHandle,
} from './redis-server.js';

/**
 * A client that fails fast instead of reconnecting forever. Connection errors
 * are expected in some tests: tests that check them add their own listener.
 */
function client(url: string, options: RedisOptions = {}): Redis {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
    ...options,
  });
  redis.on('error', () => undefined);
  return redis;
}

async function roundTrip(redis: Redis, value: string): Promise<string | null> {
  await redis.set('helper:key', value);
  return redis.get('helper:key');
}

/** Whether `port` on 127.0.0.1 can be bound, i.e. nothing listens on it. */
function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('redis-server test helper', () => {
  const started: RedisServerHandle[] = [];
  const clients: Redis[] = [];

  async function start(
    ...args: Parameters<typeof startRedisServer>
  ): Promise<RedisServerHandle> {
    const server = await startRedisServer(...args);
    started.push(server);
    return server;
  }

  function connect(url: string, options?: RedisOptions): Redis {
    const redis = client(url, options);
    clients.push(redis);
    return redis;
  }

  afterEach(async () => {
    for (const redis of clients.splice(0)) redis.disconnect();
    await Promise.all(started.splice(0).map((server) => server.stop()));
  });

  it('resolves the redis-server binary', () => {
    expect(redisServerBinary()).toMatch(/redis-server$/);
  });

  it('starts a server on a free loopback port and stops it', async () => {
    const server = await start();
    expect(server.host).toBe('127.0.0.1');
    expect(server.port).toBeGreaterThan(0);
    expect(server.port).not.toBe(6379);
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    const pid = server.pid();
    expect(pid).toBeTypeOf('number');

    const redis = connect(server.url);
    expect(await roundTrip(redis, 'plain')).toBe('plain');
    redis.disconnect();

    await server.stop();
    expect(server.pid()).toBeUndefined();
    expect(isAlive(pid!)).toBe(false);
    expect(await canBind(server.port)).toBe(true);
    await server.stop(); // idempotent
  });

  it('restarts on the same port with an empty data set', async () => {
    const server = await start();
    const firstPid = server.pid();
    const before = connect(server.url);
    await before.set('survives', 'no');
    before.disconnect();

    await server.restart();
    expect(server.pid()).toBeTypeOf('number');
    expect(server.pid()).not.toBe(firstPid);
    const after = connect(server.url);
    expect(await after.get('survives')).toBeNull();
    expect(await roundTrip(after, 'again')).toBe('again');
    after.disconnect();

    await server.stop();
    await server.restart(); // from stopped, too
    const third = connect(server.url);
    expect(await third.ping()).toBe('PONG');
  });

  it('kills a server with SIGKILL and can bring it back', async () => {
    const server = await start();
    const pid = server.pid()!;
    await server.kill();
    expect(server.pid()).toBeUndefined();
    expect(isAlive(pid)).toBe(false);
    expect(await canBind(server.port)).toBe(true);
    await server.kill(); // idempotent

    await server.restart();
    const redis = connect(server.url);
    expect(await redis.ping()).toBe('PONG');
  });

  it('protects the default user with a password', async () => {
    const server = await start({ password: 'p@ss word' });
    expect(server.url).toBe(`redis://:p%40ss%20word@127.0.0.1:${server.port}`);
    const anonymous = connect(`redis://127.0.0.1:${server.port}`);
    await expect(anonymous.get('x')).rejects.toThrow(/NOAUTH/);

    const redis = connect(server.url);
    expect(await roundTrip(redis, 'secret')).toBe('secret');
  });

  it('adds an ACL user and leaves the default user open', async () => {
    const server = await start({
      aclUser: { name: 'locker', password: 'pw:1/2' },
    });
    expect(server.url).toBe(
      `redis://locker:pw%3A1%2F2@127.0.0.1:${server.port}`,
    );
    const redis = connect(server.url);
    expect(await redis.call('ACL', 'WHOAMI')).toBe('locker');
    expect(await roundTrip(redis, 'acl')).toBe('acl');

    const anonymous = connect(`redis://127.0.0.1:${server.port}`);
    expect(await anonymous.call('ACL', 'WHOAMI')).toBe('default');

    const wrong = connect(`redis://locker:nope@127.0.0.1:${server.port}`);
    const errors: Error[] = [];
    wrong.on('error', (error: Error) => errors.push(error));
    await expect(wrong.connect()).rejects.toThrow();
    expect(errors.map(String).join('\n')).toMatch(/WRONGPASS/);
  });

  it('serves TLS only, with a certificate signed by the returned CA', async () => {
    const server = await start({ tls: true, password: 'tls-pass' });
    expect(server.url).toBe(`rediss://:tls-pass@127.0.0.1:${server.port}`);
    expect(server.tlsCa).toBeInstanceOf(Buffer);
    expect(server.tlsCa!.toString()).toContain('BEGIN CERTIFICATE');

    const redis = connect(server.url, { tls: { ca: server.tlsCa } });
    expect(await roundTrip(redis, 'encrypted')).toBe('encrypted');
    redis.disconnect();

    // Without the CA the certificate is not trusted.
    const untrusted = connect(server.url, { tls: {} });
    const errors: Error[] = [];
    untrusted.on('error', (error: Error) => errors.push(error));
    await expect(untrusted.connect()).rejects.toThrow();
    expect(errors.map(String).join('\n')).toMatch(/certificate/i);

    // The CA survives a restart, so clients keep working.
    await server.restart();
    const again = connect(server.url, { tls: { ca: server.tlsCa } });
    expect(await again.ping()).toBe('PONG');
  });

  it('freezes a server so nothing answers, and thaws it', async () => {
    const server = await start();
    const pid = server.pid()!;
    const redis = connect(server.url);
    await redis.set('frozen', 'answer');

    await server.freeze();
    await server.freeze(); // idempotent
    expect(isProcessStopped(pid)).toBe(true);
    expect(server.pid()).toBe(pid);
    let settled = false;
    const reply = redis.get('frozen').finally(() => (settled = true));
    await sleep(200);
    expect(settled).toBe(false);
    expect(redis.status).toBe('ready'); // the connection stays open

    await server.thaw();
    await server.thaw(); // idempotent
    expect(isProcessStopped(pid)).toBe(false);
    expect(await reply).toBe('answer');
  });

  it('a frozen server times commands out', async () => {
    const server = await start();
    const redis = connect(server.url, { commandTimeout: 200 });
    await redis.ping();
    await server.freeze();
    await expect(redis.ping()).rejects.toThrow(/timed out/i);
  });

  it('stops, kills and restarts a frozen server', async () => {
    const server = await start();
    await server.freeze();
    let pid = server.pid()!;
    const stopStarted = performance.now();
    await server.stop();
    // SIGTERM was acted on at once, not after the 5 s SIGKILL fallback.
    expect(performance.now() - stopStarted).toBeLessThan(2_000);
    expect(isAlive(pid)).toBe(false);
    expect(await canBind(server.port)).toBe(true);

    await server.restart();
    await server.freeze();
    pid = server.pid()!;
    await server.kill();
    expect(isAlive(pid)).toBe(false);

    await server.restart();
    await server.freeze();
    pid = server.pid()!;
    await server.restart();
    expect(isAlive(pid)).toBe(false);
    expect(await connect(server.url).ping()).toBe('PONG');

    await server.stop();
    await server.freeze(); // not running: nothing to do
    await server.thaw();
  });

  it('kills a frozen server left running when the process exits', async () => {
    const stdout = await runTs('test/support/workers/frozen-redis.ts', []);
    const { pid } = JSON.parse(stdout) as { pid: number };
    expect(pid).toBeTypeOf('number');
    await eventually(() => isProcessGone(pid), 2_000);
  });
});
