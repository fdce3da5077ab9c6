import { Redis } from 'ioredis';
import {
  LockBackendError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  currentLock,
  type LockLostEvent,
  type LockService,
} from '@app/distributed-lock';
import {
  createLockService,
  eventually,
  sleep,
} from '../../../test/support/lock-fixtures.js';
import { runTs, spawnTs } from '../../../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { openMonitor } from '../../../test/support/redis-monitor.js';

let server: RedisServerHandle;
let redis: Redis;
const opened: Array<() => Promise<void>> = [];

function service(
  settings: Parameters<typeof createLockService>[1] = {},
): LockService {
  const created = createLockService(server.url, settings);
  opened.push(created.close);
  return created.locks;
}

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((close) => close()));
  await redis.flushall();
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describe('mutual exclusion', () => {
  it('keeps a non-atomic counter exact across 4 OS processes', async () => {
    const worker = 'test/support/workers/counter-worker.ts';
    const outputs = await Promise.all(
      [1, 2, 3, 4].map(() => runTs(worker, [server.url, '40', 'lock', '4'])),
    );
    expect(Number(await redis.get('counter'))).toBe(160);
    const tokens = outputs.flatMap(
      (out) => (JSON.parse(out) as { fencingTokens: number[] }).fencingTokens,
    );
    expect(new Set(tokens).size).toBe(160);
  });

  it('loses updates without the lock (the check above can fail)', async () => {
    const worker = 'test/support/workers/counter-worker.ts';
    await Promise.all(
      [1, 2, 3, 4].map(() => runTs(worker, [server.url, '40', 'nolock', '4'])),
    );
    expect(Number(await redis.get('counter'))).toBeLessThan(160);
  });

  it('lets one of many concurrent callers in at a time within a process', async () => {
    const locks = service();
    let inside = 0;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 20 }, () =>
        locks.using('shared', async () => {
          maxInside = Math.max(maxInside, ++inside);
          await sleep(2);
          inside--;
        }),
      ),
    );
    expect(maxInside).toBe(1);
  });
});

describe('scripts', () => {
  it('takes a free lock with one SET NX PX, runs the other verbs by EVALSHA, and recovers from a flushed script cache (NOSCRIPT)', async () => {
    const locks = service();
    const monitor = await openMonitor(redis);
    const commands: string[] = [];
    // Commands run inside scripts are reported too; keep what clients sent.
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (!source.includes('lua')) commands.push(args.join(' ').toLowerCase());
    });
    const cycle = () =>
      locks.using('scripted', async (lock) => void (await lock.fence()));
    await cycle();
    await redis.script('FLUSH');
    await cycle();
    await cycle();
    await cycle();
    // 4 cycles of SET + fence + release, the flush, and two EVALSHAs refused
    // with NOSCRIPT and sent again by EVAL, as MONITOR reports them
    // (asynchronously).
    await eventually(() => commands.length >= 15);
    monitor.disconnect();
    const verbs = commands.map((command) => command.split(' ')[0]);
    expect(commands.filter((c) => c.startsWith('set '))).toHaveLength(4);
    for (const set of commands.filter((c) => c.startsWith('set ')))
      expect(set).toMatch(/^set lock:\{scripted\} \S+ px \d+ nx$/);
    expect(verbs).not.toContain('del');
    // After the flush the scripts are sent again once (EVAL after NOSCRIPT)...
    expect(
      verbs.slice(verbs.indexOf('script')).filter((v) => v === 'eval'),
    ).toHaveLength(2);
    // ...and from then on referred to by their SHA only.
    expect(verbs.slice(-6)).toEqual([
      'set',
      'evalsha',
      'evalsha',
      'set',
      'evalsha',
      'evalsha',
    ]);
    expect(await redis.exists('lock:{scripted}')).toBe(0);
  });
});

describe('ownership', () => {
  it('uses a fresh random token of at least 128 bits per acquisition', async () => {
    const locks = service();
    const tokens = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const handle = await locks.acquire('token');
      expect(
        Buffer.from(handle.token, 'base64url').length,
      ).toBeGreaterThanOrEqual(16);
      expect(await redis.get('lock:{token}')).toBe(handle.token);
      tokens.add(handle.token);
      await handle.release();
    }
    expect(tokens.size).toBe(20);
  });

  it('never deletes the lock of the next owner when an expired holder releases', async () => {
    const locks = service();
    const stale = await locks.acquire('owned', { leaseTime: 100 });
    await sleep(150);
    const current = await locks.acquire('owned', { waitTime: 0 });
    expect(await stale.release()).toBe(false);
    expect(stale.lost).toBe(true);
    expect(await redis.get('lock:{owned}')).toBe(current.token);
    expect(await current.release()).toBe(true);
    expect(await redis.exists('lock:{owned}')).toBe(0);
  });

  it('release is idempotent and reports the first result', async () => {
    const locks = service();
    const handle = await locks.acquire('twice');
    expect(await handle.release()).toBe(true);
    expect(await handle.release()).toBe(true);
    expect(await locks.isLocked('twice')).toBe(false);
  });
});

describe('leases', () => {
  it('an explicit lease expires and is not renewed; the holder is told', async () => {
    const locks = service();
    const lost: LockLostEvent[] = [];
    locks.events.on('lost', (event) => lost.push(event));
    const handle = await locks.acquire('lease', { leaseTime: 200 });
    const pttl = await redis.pttl('lock:{lease}');
    expect(pttl).toBeGreaterThan(100);
    expect(pttl).toBeLessThanOrEqual(200);
    await sleep(300);
    expect(await redis.exists('lock:{lease}')).toBe(0);
    expect(handle.signal.aborted).toBe(true);
    expect(handle.signal.reason).toBeInstanceOf(LockLostError);
    expect(lost).toMatchObject([{ key: 'lease', reason: 'lease-expired' }]);
  });

  it('the watchdog renews the lease across at least 3 lease periods', async () => {
    const locks = service({ watchdogLeaseTime: 300 });
    const rival = service();
    const handle = await locks.acquire('watched');
    for (let i = 0; i < 8; i++) {
      await sleep(150);
      expect(await redis.get('lock:{watched}')).toBe(handle.token);
      expect(await rival.tryAcquire('watched')).toBeNull();
    }
    expect(handle.lost).toBe(false);
    await handle.release();
    expect(await redis.exists('lock:{watched}')).toBe(0);
    // Released: no timer keeps renewing a lock we gave back.
    await sleep(400);
    expect(await redis.exists('lock:{watched}')).toBe(0);
  });

  it('aborts the signal and emits "lost" when the key is deleted behind the holder', async () => {
    const locks = service({ watchdogLeaseTime: 300 });
    const lost: LockLostEvent[] = [];
    locks.events.on('lost', (event) => lost.push(event));
    const handle = await locks.acquire('stolen');
    await redis.del('lock:{stolen}');
    await eventually(() => handle.signal.aborted, 2_000);
    expect(lost).toMatchObject([
      { key: 'stolen', reason: 'taken-over', token: handle.token },
    ]);
    expect(await handle.release()).toBe(false);
  });

  it('extend() sets the remaining lease while owned', async () => {
    const locks = service();
    const handle = await locks.acquire('extend', { leaseTime: 200 });
    expect(await handle.extend(5_000)).toBe(true);
    expect(await redis.pttl('lock:{extend}')).toBeGreaterThan(4_000);
    await redis.set('lock:{extend}', 'someone-else');
    expect(await handle.extend(5_000)).toBe(false);
    expect(handle.lost).toBe(true);
    expect(await redis.get('lock:{extend}')).toBe('someone-else');
  });
});

describe('waiting', () => {
  it('wakes a waiter as soon as the lock is released, not on a polling tick', async () => {
    const locks = service();
    const holder = await locks.acquire('wake');
    let acquiredAt = 0;
    const waiting = locks
      .acquire('wake', { waitTime: 10_000 })
      .then((handle) => {
        acquiredAt = performance.now();
        return handle;
      });
    await sleep(300);
    const releasedAt = performance.now();
    await holder.release();
    const next = await waiting;
    expect(acquiredAt - releasedAt).toBeLessThan(100);
    await next.release();
  });

  it('lets the waiter it hands the lock to in this process run before the releaser goes on', async () => {
    const locks = service();
    const holder = await locks.acquire('next-first');
    const order: string[] = [];
    const waiting = locks
      .acquire('next-first', { waitTime: 10_000 })
      .then(async (handle) => {
        order.push('new holder starts');
        // A few steps of its own work, as the next request under the lock.
        for (let step = 0; step < 10; step++) await Promise.resolve();
        order.push('new holder is still going');
        return handle;
      });
    await sleep(100);
    await holder.release();
    order.push('releaser goes on');
    expect(order).toEqual([
      'new holder starts',
      'new holder is still going',
      'releaser goes on',
    ]);
    await (await waiting).release();
  });

  it('serves waiters across processes in arrival order', async () => {
    const holderLocks = service();
    const others = [service(), service(), service()];
    const holder = await holderLocks.acquire('fifo');
    const order: number[] = [];
    const waits: Promise<void>[] = [];
    for (const [index, locks] of others.entries()) {
      waits.push(
        locks.using('fifo', () => void order.push(index), { waitTime: 10_000 }),
      );
      await sleep(30);
    }
    await holder.release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2]);
  });

  it('gives up after waitTime with LockNotAcquiredError and leaves the queue', async () => {
    const locks = service();
    const holder = await locks.acquire('patience', { leaseTime: 5_000 });
    const started = performance.now();
    const error = await locks
      .acquire('patience', { waitTime: 200 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).key).toBe('patience');
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(await redis.llen('lock:{patience}:queue')).toBe(0);
    await holder.release();
    expect(await locks.isLocked('patience')).toBe(false);
  });

  it('wakes the next waiter when a lease expires without a release', async () => {
    const locks = service({ handoffLeaseMs: 500 });
    const abandoned = await locks.acquire('expire', { leaseTime: 300 });
    const started = performance.now();
    const next = await locks.acquire('expire', { waitTime: 5_000 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(abandoned.lost).toBe(true);
    await next.release();
  });

  it('a waiter whose process was killed in the queue stalls the others at most a hand-off lease', async () => {
    const handoffLeaseMs = 500;
    const holderLocks = service();
    const survivor = service({ handoffLeaseMs });
    const holder = await holderLocks.acquire('dead-waiter');
    const holderFence = await holder.fence();
    const doomed = spawnTs('test/support/workers/queued-waiter.ts', [
      server.url,
      'dead-waiter',
      String(handoffLeaseMs),
    ]);
    await eventually(
      async () => (await redis.llen('lock:{dead-waiter}:queue')) === 1,
      10_000,
    );
    const survivorGot = survivor.acquire('dead-waiter', { waitTime: 20_000 });
    await eventually(
      async () => (await redis.llen('lock:{dead-waiter}:queue')) === 2,
    );
    doomed.kill('SIGKILL');
    await new Promise((resolve) => doomed.once('exit', resolve));

    const started = performance.now();
    await holder.release();
    const handle = await survivorGot;
    // Handed first to the dead waiter, whose short hand-off lease then lapses.
    expect(performance.now() - started).toBeLessThan(handoffLeaseMs * 4);
    expect(await handle.fence()).toBeGreaterThan(holderFence);
    await handle.release();
  });
});

describe('reentrancy', () => {
  it('a nested acquisition in the same call chain succeeds and the key is freed at the outermost release', async () => {
    const locks = service();
    await locks.using('re', async (outer) => {
      const inner = await locks.acquire('re', { waitTime: 0 });
      expect(inner.reentrant).toBe(true);
      expect(inner.token).toBe(outer.token);
      expect(await inner.fence()).toBe(await outer.fence());
      expect(await inner.release()).toBe(true);
      expect(await locks.isLocked('re')).toBe(true);
      await locks.using('re', async () => {
        expect(currentLock()?.keys).toEqual(['re']);
      });
      expect(await locks.isLocked('re')).toBe(true);
    });
    expect(await locks.isLocked('re')).toBe(false);
  });

  it('two concurrent chains in one process are different owners', async () => {
    const locks = service();
    const first = locks.using('separate', () => sleep(200));
    await sleep(20);
    await expect(
      locks.acquire('separate', { waitTime: 0 }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    await first;
  });

  it('a nested acquisition of a lost lock fails with LockLostError', async () => {
    const locks = service();
    await locks.using(
      'lost-outer',
      async () => {
        await sleep(200);
        await expect(locks.acquire('lost-outer')).rejects.toBeInstanceOf(
          LockLostError,
        );
      },
      { leaseTime: 100 },
    );
  });
});

describe('fencing tokens', () => {
  it('strictly increase per key across acquisitions, hand-offs and expiries', async () => {
    const locks = service();
    const seen: number[] = [];
    const first = await locks.acquire('fence', { leaseTime: 100 });
    seen.push(await first.fence());
    await sleep(150);
    const waiters = [1, 2, 3].map(() =>
      locks.using('fence', async (lock) => {
        seen.push(await lock.fence());
        await sleep(5);
      }),
    );
    await Promise.all(waiters);
    const other = await locks.acquire('another-key');
    // Per key: another key's tokens are unrelated, but also above every earlier one.
    expect(await other.fence()).toBeGreaterThan(0);
    expect(seen).toHaveLength(4);
    for (let i = 1; i < seen.length; i++)
      expect(seen[i]).toBeGreaterThan(seen[i - 1]);
  });

  it('are at least the server clock in microseconds, and rise with each holder', async () => {
    const locks = service();
    const [seconds, micros] = await redis.time();
    const clockUs = Number(seconds) * 1e6 + Number(micros);
    const tokens: number[] = [];
    for (let i = 0; i < 3; i++) {
      const handle = await locks.acquire('fence-seed');
      tokens.push(await handle.fence());
      await handle.release();
    }
    expect(tokens[0]).toBeGreaterThanOrEqual(clockUs);
    expect(tokens[0]).toBeLessThan(clockUs + 60e6);
    expect(tokens[1]).toBeGreaterThan(tokens[0]);
    expect(tokens[2]).toBeGreaterThan(tokens[1]);
    expect(Number.isSafeInteger(tokens[2])).toBe(true);
  });

  it('keep rising when the counter is set back, as a failover to a lagging replica does', async () => {
    const locks = service();
    const counter = 'lock:{fence-set-back}:fence';
    const issued: number[] = [];
    for (let i = 0; i < 3; i++) {
      const handle = await locks.acquire('fence-set-back');
      issued.push(await handle.fence());
      await handle.release();
    }
    // The replica promoted in a failover had received only the first token.
    await redis.set(counter, String(issued[0]));
    const afterFailover = await locks.acquire('fence-set-back');
    expect(await afterFailover.fence()).toBeGreaterThan(issued[2]);
    await afterFailover.release();
  });

  it('keep rising when the counter vanishes or is found unseeded', async () => {
    const locks = service();
    const counter = 'lock:{fence-gone}:fence';
    const first = await locks.acquire('fence-gone');
    const firstFence = await first.fence();
    await first.release();
    // The counter expired (or Redis lost it) while the lock was idle.
    await redis.del(counter);
    const afterLoss = await locks.acquire('fence-gone');
    const afterLossFence = await afterLoss.fence();
    await afterLoss.release();
    // A counter created by a bare INCR (for instance after it expired while a
    // waiter's script ran) holds a small number: it must be re-seeded.
    await redis.set(counter, '7');
    const afterReset = await locks.acquire('fence-gone');
    const afterResetFence = await afterReset.fence();
    await afterReset.release();
    expect(afterLossFence).toBeGreaterThan(firstFence);
    expect(afterResetFence).toBeGreaterThan(afterLossFence);
  });

  it('rise across a hand-off from an unseeded counter too', async () => {
    const locks = service();
    const holder = await locks.acquire('fence-handoff');
    const holderFence = await holder.fence();
    await redis.set('lock:{fence-handoff}:fence', '3');
    const waiter = locks.acquire('fence-handoff', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('lock:{fence-handoff}:queue')) === 1,
    );
    await holder.release();
    const next = await waiter;
    const nextFence = await next.fence();
    await next.release();
    expect(nextFence).toBeGreaterThan(holderFence);
  });
});

describe('fencing tokens on demand', () => {
  it('cost nothing for a lock that never asks for one', async () => {
    const locks = service();
    await locks.using('no-fence', () => undefined);
    expect(await redis.exists('lock:{no-fence}:fence')).toBe(0);
  });

  it('are issued only to the holder: not after the lease ran out, nor after release', async () => {
    const locks = service();
    const late = await locks.acquire('fence-late', { leaseTime: 100 });
    await sleep(150);
    const next = await locks.acquire('fence-late', { waitTime: 0 });
    const nextFence = await next.fence();
    await expect(late.fence()).rejects.toBeInstanceOf(LockLostError);
    expect(late.lost).toBe(true);
    // The refused request issued nothing.
    expect(Number(await redis.get('lock:{fence-late}:fence'))).toBe(nextFence);
    await next.release();
    await expect(next.fence()).resolves.toBe(nextFence);
    const released = await locks.acquire('fence-late');
    await released.release();
    await expect(released.fence()).rejects.toBeInstanceOf(LockLostError);
  });

  it('issue one token per hold however many ask at once, and a lock handed over from the queue brings its own', async () => {
    const locks = service();
    const holder = await locks.acquire('fence-once');
    const asked = await Promise.all([holder.fence(), holder.fence()]);
    expect(asked[1]).toBe(asked[0]);
    const counter = 'lock:{fence-once}:fence';
    expect(Number(await redis.get(counter))).toBe(asked[0]);
    const waiter = service().acquire('fence-once', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('lock:{fence-once}:queue')) === 1,
    );
    await holder.release();
    const next = await waiter;
    const handedFence = Number(await redis.get(counter));
    expect(handedFence).toBeGreaterThan(asked[0]);
    expect(await next.fence()).toBe(handedFence);
    expect(Number(await redis.get(counter))).toBe(handedFence);
    await next.release();
  });
});

describe('multi-key', () => {
  it('acquires all or nothing', async () => {
    const locks = service();
    const blocker = await locks.acquire('m:b');
    await expect(
      locks.acquire(['m:a', 'm:b', 'm:c'], { waitTime: 50 }),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await locks.isLocked('m:a')).toBe(false);
    expect(await locks.isLocked('m:c')).toBe(false);
    await blocker.release();
    const all = await locks.acquire(['m:c', 'm:a', 'm:b']);
    expect(all.keys).toEqual(['m:a', 'm:b', 'm:c']);
    expect([...(await all.fences()).keys()]).toEqual(['m:a', 'm:b', 'm:c']);
    await all.release();
    expect(await redis.exists('lock:{m:a}', 'lock:{m:b}', 'lock:{m:c}')).toBe(
      0,
    );
  });

  it('never deadlocks when callers name the keys in opposite orders', async () => {
    const a = service();
    const b = service();
    let done = 0;
    await Promise.all([
      ...Array.from({ length: 30 }, () =>
        a.using(
          ['x', 'y'],
          async () => {
            await sleep(1);
            done++;
          },
          { waitTime: 20_000 },
        ),
      ),
      ...Array.from({ length: 30 }, () =>
        b.using(
          ['y', 'x'],
          async () => {
            await sleep(1);
            done++;
          },
          { waitTime: 20_000 },
        ),
      ),
    ]);
    expect(done).toBe(60);
  });
});

describe('bad input', () => {
  it.each([[''], ['a{b}'], ['x'.repeat(600)], ['line\nbreak']])(
    'rejects the key %j with LockKeyError and locks nothing',
    async (key) => {
      const locks = service();
      await expect(locks.acquire(key)).rejects.toBeInstanceOf(LockKeyError);
      expect(await redis.dbsize()).toBe(0);
    },
  );

  it('rejects nonsense options with a RangeError', async () => {
    const locks = service();
    await expect(locks.acquire('k', { leaseTime: -1 })).rejects.toBeInstanceOf(
      RangeError,
    );
    await expect(
      locks.acquire('k', { waitTime: Number.NaN }),
    ).rejects.toBeInstanceOf(RangeError);
    expect(await redis.dbsize()).toBe(0);
  });
});

describe('Redis unavailable', () => {
  it('fails with LockBackendError within the command timeout, then works again after a restart', async () => {
    const own = await startRedisServer();
    const { locks, close } = createLockService(own.url, {
      commandTimeoutMs: 500,
    });
    opened.push(close);
    const held = await locks.acquire('outage', { leaseTime: 60_000 });
    await own.stop();

    const started = performance.now();
    await expect(
      locks.acquire('other', { waitTime: 5_000 }),
    ).rejects.toBeInstanceOf(LockBackendError);
    expect(performance.now() - started).toBeLessThan(1_500);
    await expect(held.release()).rejects.toBeInstanceOf(LockBackendError);

    await own.restart();
    await eventually(async () => {
      try {
        const handle = await locks.acquire('after-restart', { waitTime: 0 });
        await handle.release();
        return true;
      } catch {
        return false;
      }
    }, 10_000);
    await own.stop();
  });
});
