/**
 * `minHoldTime` on Redis: a method that returns sooner leaves its key to
 * expire at acquisition + minHoldTime, as a plain lease nobody renews, with
 * sessions or without; a queued waiter gets it only then; a process killed
 * after its method returned blocks nobody longer, while one killed during
 * it holds the lock until its session lapses; closing the app meanwhile
 * keeps the key until then too. Also `LockHandle.expireIn` on its own.
 */
import type { ChildProcess } from 'node:child_process';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  DistributedLock,
  DistributedLockModule,
  LockService,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { spawnTs } from '../../../../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import type { OneRunOptions } from './fixtures/one-run.js';

const holdMs = 1_000;

@Injectable()
class Job {
  @DistributedLock('job:quick', { onBusy: 'skip', minHoldTime: holdMs })
  async quick(): Promise<string> {
    return 'ran';
  }

  @DistributedLock('job:quick', { waitTime: 5_000 })
  async patient(): Promise<number> {
    return Date.now();
  }
}

let server: RedisServerHandle;
let observer: Redis;
const apps: TestingModule[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
});

afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await observer.flushall();
});

afterAll(async () => {
  observer?.disconnect();
  await server?.stop();
});

async function instance(sessionTtl?: number | false): Promise<TestingModule> {
  const app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url, sessionTtl })],
    providers: [Job],
  }).compile();
  await app.init();
  apps.push(app);
  return app;
}

/** Resolves when `key` is gone from Redis, with the time it went (epoch ms). */
async function goneAt(key: string, timeoutMs: number): Promise<number> {
  await eventually(async () => (await observer.exists(key)) === 0, timeoutMs);
  return Date.now();
}

/** Starts fixtures/one-run.ts; resolves with the child once it printed `event`. */
function oneRun(options: Omit<OneRunOptions, 'url'>, event: string) {
  const child = spawnTs('libs/distributed-lock/test/cron/fixtures/one-run.ts', [
    JSON.stringify({ url: server.url, ...options }),
  ]);
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk));
  return new Promise<ChildProcess>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk;
      if (stdout.includes(`"event":"${event}"`)) resolve(child);
    });
    child.once('exit', () => reject(new Error(`one-run exited:\n${stderr}`)));
  });
}

async function killed(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

it.each([
  ['bound to the process session', 5_000, /\./],
  ['renewed by its watchdog (sessions off)', false, /^[^.]+$/],
] as const)(
  'leaves a key %s to expire minHoldTime after acquisition, renewed by nobody',
  async (_, sessionTtl, token) => {
    const app = await instance(sessionTtl);
    const calledAt = Date.now();
    expect(await app.get(Job).quick()).toBe('ran');
    expect(await observer.get('lock:{job:quick}')).toMatch(token);
    const left = await observer.pttl('lock:{job:quick}');
    expect(left).toBeGreaterThan(holdMs / 2);
    expect(left).toBeLessThanOrEqual(holdMs);
    await sleep(holdMs / 2);
    // Not renewed: it only went down.
    expect(await observer.pttl('lock:{job:quick}')).toBeLessThan(left - 300);
    const gone = await goneAt('lock:{job:quick}', holdMs + 2_000);
    expect(gone - calledAt).toBeGreaterThanOrEqual(holdMs - 10);
    expect(gone - calledAt).toBeLessThan(holdMs + 500);
  },
);

it('keeps a queued waiter out until the minimum hold ends, then serves it', async () => {
  const [first, second] = [await instance(), await instance()];
  const calledAt = Date.now();
  await first.get(Job).quick();
  const ranAt = await second.get(Job).patient();
  expect(ranAt - calledAt).toBeGreaterThanOrEqual(holdMs - 10);
  // Served when its check finds the key expired, not a hand-off lease later.
  expect(ranAt - calledAt).toBeLessThan(holdMs + 1_000);
});

it('keeps the key until the minimum hold ends when the app closes meanwhile', async () => {
  const [first, second] = [await instance(), await instance()];
  const calledAt = Date.now();
  await first.get(Job).quick();
  await first.close();
  apps.splice(apps.indexOf(first), 1);
  // Its session was left to lapse, not ended: a closed session would let
  // anyone free the key at once.
  await sleep(200);
  expect(await second.get(Job).quick()).toBeUndefined();
  await eventually(
    async () => (await second.get(Job).quick()) === 'ran',
    3_000,
  );
  expect(Date.now() - calledAt).toBeGreaterThanOrEqual(holdMs - 10);
  expect(Date.now() - calledAt).toBeLessThan(holdMs + 1_000);
});

it('frees the key at the end of the minimum hold when its process is killed after the method returned', async () => {
  const locks = (await instance()).get(LockService);
  const child = await oneRun(
    { minHoldTime: holdMs, sessionTtl: 10_000, stuck: false },
    'ran',
  );
  const ranAt = Date.now();
  await killed(child);
  expect(await locks.tryAcquire('job:one-run')).toBeNull();
  let handle = null;
  await eventually(
    async () => (handle = await locks.tryAcquire('job:one-run')) !== null,
    5_000,
  );
  // Well before the dead process's session (10 s) would have lapsed.
  expect(Date.now() - ranAt).toBeLessThan(holdMs + 500);
  await handle!.release();
});

it('holds the key until its session lapses when its process is killed during the method', async () => {
  const locks = (await instance()).get(LockService);
  const sessionTtl = 3_000;
  const child = await oneRun(
    { minHoldTime: holdMs, sessionTtl, stuck: true },
    'running',
  );
  const runningAt = Date.now();
  await killed(child);
  await sleep(holdMs + 500);
  expect(await locks.tryAcquire('job:one-run')).toBeNull();
  let handle = null;
  await eventually(
    async () => (handle = await locks.tryAcquire('job:one-run')) !== null,
    sessionTtl + 2_000,
  );
  // Its last renewal, a third of the TTL before the kill at most, set it.
  expect(Date.now() - runningAt).toBeGreaterThanOrEqual((sessionTtl * 2) / 3);
  await handle!.release();
});

describe('LockHandle.expireIn', () => {
  it('leaves the key for ms, then it is gone; release() answers the same', async () => {
    const locks = (await instance()).get(LockService);
    const handle = await locks.acquire('job:direct');
    const leaving = handle.expireIn(300);
    expect(await leaving).toBe(true);
    expect(handle.release()).toBe(leaving);
    expect(await locks.isLocked('job:direct')).toBe(true);
    await goneAt('lock:{job:direct}', 1_000);
    expect(await locks.tryAcquire('job:direct')).not.toBeNull();
  });

  it('only releases keys shared with an outer hold of the chain', async () => {
    const locks = (await instance()).get(LockService);
    const outer = await locks.acquire('job:nested');
    await outer.run(async () => {
      const inner = await locks.acquire('job:nested');
      expect(inner.reentrant).toBe(true);
      expect(await inner.expireIn(5_000)).toBe(true);
    });
    // The outer hold still renews its own lease, and frees the key at once.
    expect(await observer.pttl('lock:{job:nested}')).toBeGreaterThan(5_000);
    await outer.release();
    expect(await locks.isLocked('job:nested')).toBe(false);
  });

  it('rejects a negative or non-finite time with RangeError', async () => {
    const locks = (await instance()).get(LockService);
    const handle = await locks.acquire('job:direct');
    expect(() => handle.expireIn(-1)).toThrow(RangeError);
    expect(() => handle.expireIn(Number.NaN)).toThrow(RangeError);
    await handle.release();
  });
});
