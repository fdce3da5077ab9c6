/**
 * LockHealthIndicator on one Redis, through a real terminus
 * HealthCheckService: up with its details, down in bounded time when Redis
 * is frozen or stopped, the script cache and the session as details.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  MemoryLockBackend,
  RedisLockBackend,
  type LockBackend,
} from '@app/distributed-lock';
import type { SessionStore } from '../../src/backends/lock-backend.js';
import { lockScriptSources } from '../../src/backends/redis/lock-scripts.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { eventually } from '../../../../test/support/lock-fixtures.js';
import { blockUntilAnswersArrive } from '../../../../test/support/socket-queue.js';
import { useHealthApps } from './health-fixtures.js';

let server: RedisServerHandle;
let observer: Redis;

beforeEach(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
  observer.on('error', () => undefined);
});

afterEach(async () => {
  observer.disconnect();
  await server.stop();
});

const open = useHealthApps();

describe('LockHealthIndicator on one Redis', () => {
  it('is up with the round trip, the scripts and the session, not opened before the first lock', async () => {
    const { check, locks } = await open({ redis: server.url });
    const before = await check();
    expect(before.httpStatus).toBe(200);
    expect(before.result.status).toBe('ok');
    expect(before.lock.session).toEqual({
      state: 'none',
      alive: true,
      ttlMs: 5000,
    });

    await (await locks.acquire('coupon:1')).release();
    const { lock, result } = await check();
    expect(result.info).toHaveProperty('lock');
    expect(lock).toMatchObject({
      status: 'up',
      store: 'redis',
      reachable: true,
      scriptsLoaded: true,
      session: { state: 'open', alive: true, id: locks.sessionId },
      nodes: [
        {
          address: `127.0.0.1:${server.port}`,
          up: true,
          scriptsLoaded: true,
          scriptsMissing: 0,
        },
      ],
    });
    expect(lock.latencyMs).toBeGreaterThanOrEqual(0);
    expect(lock.latencyMs).toBeLessThan(200);
    expect(lock.session.expiresInMs).toBeGreaterThan(5000 / 3);
  });

  it('stays up after SCRIPT FLUSH, says how many scripts were missing, and loads them again', async () => {
    const { check } = await open({ redis: server.url });
    await check();
    await observer.script('FLUSH');

    const flushed = await check();
    expect(flushed.httpStatus).toBe(200);
    expect(flushed.lock.scriptsLoaded).toBe(true);
    expect(flushed.lock.nodes[0].scriptsMissing).toBe(lockScriptSources.length);
    const digests = lockScriptSources.map((lua) =>
      createHash('sha1').update(lua).digest('hex'),
    );
    expect(await observer.script('EXISTS', ...digests)).toEqual(
      digests.map(() => 1),
    );
    expect((await check()).lock.nodes[0].scriptsMissing).toBe(0);
  });

  it('stays up for a Redis user that may not run SCRIPT: the scripts are then not told', async () => {
    await server.stop();
    server = await startRedisServer({
      extraArgs: '--user locker on >secret ~* &* +@all -script'.split(' '),
    });
    const url = `redis://locker:secret@127.0.0.1:${server.port}`;
    const { check, locks } = await open({ redis: url });
    await (await locks.acquire('coupon:1')).release();
    const { httpStatus, lock } = await check();
    expect(httpStatus).toBe(200);
    expect(lock.scriptsLoaded).toBeUndefined();
    expect(lock.nodes[0]).toMatchObject({
      up: true,
      message: expect.stringMatching(/scripts not checked: NOPERM/),
    });
    expect(lock.nodes[0].scriptsLoaded).toBeUndefined();
  });

  it('is down within the command timeout while Redis is frozen (SIGSTOP), or within `timeout`', async () => {
    const { check, locks } = await open({
      redis: server.url,
      commandTimeout: 500,
    });
    await (await locks.acquire('coupon:1')).release();
    await server.freeze();

    const frozen = await check();
    expect(frozen.httpStatus).toBe(503);
    expect(frozen.result.status).toBe('error');
    expect(frozen.result.error).toHaveProperty('lock');
    expect(frozen.lock).toMatchObject({
      status: 'down',
      reachable: false,
      message: 'no answer within 500 ms',
      nodes: [{ up: false, message: 'no answer within 500 ms' }],
    });
    expect(frozen.elapsedMs).toBeGreaterThanOrEqual(450);
    expect(frozen.elapsedMs).toBeLessThan(1000);

    const sooner = await check({ timeout: 150 });
    expect(sooner.httpStatus).toBe(503);
    expect(sooner.lock.message).toBe('no answer within 150 ms');
    expect(sooner.elapsedMs).toBeLessThan(500);

    await server.thaw();
    expect((await check()).httpStatus).toBe(200);
  });

  it('is down at once when Redis is stopped, and up again with the lapsed session once it is back', async () => {
    // A client of the caller's, with ioredis's defaults: a command sent
    // while it reconnects would wait in its offline queue.
    const client = new Redis(server.url);
    client.on('error', () => undefined);
    const { check, locks } = await open({ redis: client, sessionTtl: 1000 });
    await (await locks.acquire('coupon:1')).release();
    await server.stop();
    await eventually(() => client.status === 'reconnecting');

    const stopped = await check();
    expect(stopped.httpStatus).toBe(503);
    expect(stopped.lock).toMatchObject({
      reachable: false,
      message: 'not connected (reconnecting)',
    });
    // Well inside the 2000 ms command timeout: nothing waits for an answer.
    expect(stopped.elapsedMs).toBeLessThan(500);

    await eventually(() => locks.sessionId === undefined, 3000);
    await server.restart();
    let back = stopped;
    await eventually(async () => {
      back = await check();
      return back.httpStatus === 200;
    }, 5000);
    // The next lock opens a new session: the check is up meanwhile.
    expect(back.lock.session).toMatchObject({ state: 'lapsed', alive: true });
    expect(back.lock.nodes[0].scriptsMissing).toBe(lockScriptSources.length);
    client.disconnect();
  });

  it('is down while the session renewals are overdue though Redis answers, and up once it lapsed', async () => {
    const stalling = stallRenewals(
      new RedisLockBackend({ client: new Redis(server.url), ownsClient: true }),
    );
    const { check, locks } = await open({
      backend: stalling.backend,
      sessionTtl: 900,
    });
    await (await locks.acquire('coupon:1')).release();
    stalling.stall();

    let overdue = await check();
    await eventually(async () => {
      overdue = await check();
      return overdue.httpStatus === 503;
    }, 2000);
    expect(overdue.lock).toMatchObject({
      status: 'down',
      reachable: true,
      session: { state: 'open', alive: false },
      message: expect.stringMatching(/session's renewals are overdue/),
    });
    expect(overdue.lock.session.expiresInMs).toBeLessThan(300);

    let lapsed = overdue;
    await eventually(async () => {
      lapsed = await check();
      return lapsed.httpStatus === 200;
    }, 2000);
    expect(lapsed.lock.session).toMatchObject({ state: 'lapsed', alive: true });
    stalling.release();
  });
});

describe('LockHealthIndicator on other backends', () => {
  it('reports the memory backend up', async () => {
    const { check } = await open({ backend: new MemoryLockBackend() });
    const { httpStatus, lock } = await check();
    expect(httpStatus).toBe(200);
    expect(lock).toMatchObject({ status: 'up', store: 'memory', nodes: [] });
  });

  it('times isLocked on a backend without probe, down when it does not answer in time', async () => {
    const memory = new MemoryLockBackend();
    let hang = false;
    const custom: LockBackend = {
      acquire: (request) => memory.acquire(request),
      extend: (key, token, leaseMs) => memory.extend(key, token, leaseMs),
      release: (key, token) => memory.release(key, token),
      fence: (key, token) => memory.fence(key, token),
      isLocked: (key) => (hang ? new Promise(() => {}) : memory.isLocked(key)),
      close: () => memory.close(),
    };
    const { check } = await open({ backend: custom });
    expect((await check()).lock).toMatchObject({
      status: 'up',
      store: 'custom',
      latencyMs: expect.any(Number),
    });
    hang = true;
    const hung = await check({ timeout: 100 });
    expect(hung.httpStatus).toBe(503);
    expect(hung.lock.message).toBe('no answer within 100 ms');
    expect(hung.elapsedMs).toBeLessThan(500);
  });

  it("counts an isLocked answer read after the process's own stall as in time", async () => {
    const memory = new MemoryLockBackend();
    const custom: LockBackend = {
      acquire: (request) => memory.acquire(request),
      extend: (key, token, leaseMs) => memory.extend(key, token, leaseMs),
      release: (key, token) => memory.release(key, token),
      fence: (key, token) => memory.fence(key, token),
      // Answered by a real Redis, as a store of the user's would be.
      isLocked: () => observer.ping().then(() => false),
      close: () => memory.close(),
    };
    const { check } = await open({ backend: custom });
    await observer.ping();
    const checking = check({ timeout: 50 });
    for (let i = 0; i < 1_000 && observer.commandQueue.length === 0; i++)
      await Promise.resolve();
    expect(observer.commandQueue.length).toBeGreaterThan(0);
    // The answer is read only after the block, when the 50 ms are overdue.
    blockUntilAnswersArrive(200, [observer]);
    const checked = await checking;
    expect(checked.lock.message).toBeUndefined();
    expect(checked.lock.status).toBe('up');
  });
});

/**
 * `backend` whose session renewals can be held back, as when the store
 * stops confirming them, while everything else (the probe included) goes
 * to Redis as ever.
 */
function stallRenewals(backend: RedisLockBackend): {
  backend: LockBackend;
  stall(): void;
  release(): void;
} {
  const store = backend.sessions;
  const held: Array<() => void> = [];
  let stalled = false;
  const sessions: SessionStore = {
    open: (id, ttlMs) => store.open(id, ttlMs),
    renew: (id, ttlMs) =>
      stalled
        ? new Promise<boolean>((resolve) => held.push(() => resolve(false)))
        : store.renew(id, ttlMs),
    end: (id) => store.end(id),
    holdLeaseMs: store.holdLeaseMs,
  };
  return {
    backend: {
      acquire: (request) => backend.acquire(request),
      extend: (key, token, leaseMs) => backend.extend(key, token, leaseMs),
      release: (key, token) => backend.release(key, token),
      fence: (key, token) => backend.fence(key, token),
      isLocked: (key) => backend.isLocked(key),
      close: () => backend.close(),
      probe: (timeoutMs) => backend.probe(timeoutMs),
      sessions,
    },
    stall: () => (stalled = true),
    release: () => held.splice(0).forEach((answer) => answer()),
  };
}
