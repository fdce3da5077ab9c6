/**
 * LockService on one Redis, the life of one hold: the commands it sends,
 * ownership tokens, leases and the watchdog, reentrancy, bad input, and
 * Redis going away and coming back.
 */
import {
  LockBackendError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  currentLock,
  type LockLostEvent,
} from '@app/distributed-lock';
import {
  createLockService,
  eventually,
  sleep,
} from '../../../test/support/lock-fixtures.js';
import { startRedisServer } from '../../../test/support/redis-server.js';
import { openMonitor } from '../../../test/support/redis-monitor.js';
import {
  opened,
  redis,
  service,
  useLockServiceRedis,
} from './lock-service.test-support.js';

useLockServiceRedis();

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
