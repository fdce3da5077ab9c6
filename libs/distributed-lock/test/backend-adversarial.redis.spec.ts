/**
 * Adversarial tests of the Redis lock backend and LockService: races between
 * hand-offs, give-ups, releases and shutdown, late or stray wake-up messages,
 * client options that fight the backend, killed processes, Redis restarts, and
 * stress runs that would show two holders inside at once.
 *
 * Some tests push a hand-off message into a process's wake list by hand. That
 * stands for a message that arrives late or twice (a slow or reconnecting
 * blocking connection, a script re-sent after a reconnect, a duplicate queue
 * entry), which is hard to time from outside.
 */
import { Redis } from 'ioredis';
import {
  LockBackendError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  RedisLockBackend,
  type LockHandle,
} from '@app/distributed-lock';
import {
  eventually,
  settledFlag,
  sleep,
} from '../../../test/support/lock-fixtures.js';
import {
  openLocks,
  type OpenedLocks,
  type OpenLocksOptions,
} from '../../../test/support/lock-clients.js';
import { spawnTs } from '../../../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { openMonitor } from '../../../test/support/redis-monitor.js';

let server: RedisServerHandle;
let redis: Redis;
const opened: Array<() => Promise<void>> = [];

type Opened = OpenedLocks;

/** A LockService with its own connection (and so its own wake list), closed after each test. */
function open(options: OpenLocksOptions & { url?: string } = {}): Opened {
  const service = openLocks(options.url ?? server.url, options);
  opened.push(service.close);
  return service;
}

/** Private bookkeeping of a backend, to check that nothing is left behind. */
function internals(
  backend: RedisLockBackend,
): Record<string, { size: number }> {
  const b = backend as unknown as Record<string, { size: number }>;
  return {
    waiters: b.waiters,
    waitersByKey: b.waitersByKey,
    acquiring: b.acquiring,
    earlyHandoffs: b.earlyHandoffs,
    claimed: b.claimed,
    checkTimers: b.checkTimers,
    holds: b.holds,
  };
}

function expectNothingLeft(backend: RedisLockBackend): void {
  for (const [name, map] of Object.entries(internals(backend))) {
    expect({ name, size: map.size }).toEqual({ name, size: 0 });
  }
}

const queueLength = (name: string) => redis.llen(`lock:{${name}}:queue`);

/** Everything is released: of `name`'s keys only its fencing counter is left. */
async function expectOnlyFenceLeft(name: string): Promise<void> {
  expect(await redis.keys(`lock:{${name}}*`)).toEqual([`lock:{${name}}:fence`]);
}

/**
 * Records the commands clients send from now on, lower-cased, until `stop()`.
 * Commands run inside scripts are reported by MONITOR too; they are left out.
 */
async function recordClientCommands(): Promise<{
  readonly sent: string[];
  readonly stop: () => void;
}> {
  const monitor = await openMonitor(redis);
  const sent: string[] = [];
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (!source.includes('lua')) sent.push(args.join(' ').toLowerCase());
  });
  return { sent, stop: () => monitor.disconnect() };
}

/** The wake list named in the first queue entry of `name`, and that entry's token. */
async function firstQueued(
  name: string,
): Promise<{ token: string; wakeList: string }> {
  const entry = await redis.lindex(`lock:{${name}}:queue`, 0);
  if (!entry) throw new Error(`nobody queues for ${name}`);
  const [, , token, ...wakeList] = entry.split('|');
  return { token, wakeList: wakeList.join('|') };
}

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(opened.splice(0).map((close) => close()));
  await redis.flushall();
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describe('aborting and giving up', () => {
  it('an abort while the acquisition is on its way to Redis stops the wait at once', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('abort-early', { leaseTime: 10_000 });
    const controller = new AbortController();
    const started = performance.now();
    const attempt = b.locks
      .acquire('abort-early', { waitTime: 5_000, signal: controller.signal })
      .catch((error: unknown) => error);
    controller.abort();
    expect(await attempt).toBeInstanceOf(LockNotAcquiredError);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await queueLength('abort-early')).toBe(0);
    await holder.release();
    expectNothingLeft(b.backend);
  });
});

describe('leases of a lock handed over from the queue', () => {
  it('an explicit lease granted after a long wait is not reported lost at once', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('late-lease');
    const waiting = b.locks.acquire('late-lease', {
      leaseTime: 400,
      waitTime: 5_000,
    });
    await sleep(600);
    await holder.release();
    const handle = await waiting;
    expect(handle.lost).toBe(false);
    await sleep(150);
    expect(handle.lost).toBe(false);
    expect(await redis.get('lock:{late-lease}')).toBe(handle.token);
    // The lease runs from when the caller got the lock, and still just ends.
    // The local estimate errs early (by the renewal's trip to Redis), so the
    // key may outlive the notice by a moment.
    await eventually(() => handle.lost, 2_000);
    await eventually(
      async () => (await redis.exists('lock:{late-lease}')) === 0,
      200,
    );
  });
});

describe('a hand-off that arrives after it lapsed', () => {
  // The waiter cannot see when the lock was handed to it, only that it was
  // after it queued: its lease is counted from then. A message read more than
  // a hand-off lease after queueing (a paused process, a long GC) may carry a
  // grant that lapsed while another process took the lock: it is confirmed
  // with Redis before the caller runs, never trusted. (A real pause, with
  // SIGSTOP, is in faults/stale-grant.redis.spec.ts.)
  it('never reaches the caller: the waiter queues again and gets the lock from its next holder', async () => {
    const s = open({ handoffLeaseMs: 300 });
    const rival = open();
    const blocker = await rival.locks.acquire('lapsed');
    const waiting = s.locks.acquire('lapsed', { waitTime: 10_000 });
    const settled = settledFlag(waiting);
    await eventually(async () => (await queueLength('lapsed')) === 1);
    const { token, wakeList } = await firstQueued('lapsed');
    await sleep(400);
    // The message of a hand-off whose lease ran out before it was read: the
    // lock has moved on to the rival since.
    await redis.rpush(wakeList, `${token}|0|lock:{lapsed}`);
    await sleep(300);
    expect(settled()).toBe(false);
    expect(await redis.get('lock:{lapsed}')).toBe(blocker.token);
    const blockerFence = await blocker.fence();
    await blocker.release();
    const handle = await waiting;
    expect(handle.lost).toBe(false);
    expect(await redis.get('lock:{lapsed}')).toBe(handle.token);
    expect(await handle.fence()).toBeGreaterThan(blockerFence);
    await handle.release();
    expectNothingLeft(s.backend);
  });
});

describe('reentrancy', () => {
  it('a call chain that outlives its released lock does not join it', async () => {
    const locks = open().locks;
    const rival = open().locks;
    let late!: Promise<unknown>;
    await locks.using('outlived', async () => {
      late = (async () => {
        await sleep(100);
        return locks.acquire('outlived', { waitTime: 0 });
      })().catch((error: unknown) => error);
    });
    const other = await rival.acquire('outlived', { waitTime: 0 });
    const result = await late;
    expect(result).toBeInstanceOf(LockNotAcquiredError);
    expect(await redis.get('lock:{outlived}')).toBe(other.token);
    await other.release();
  });

  it('a nested hold released after its parent keeps the key until it is released', async () => {
    const locks = open().locks;
    let child!: LockHandle;
    const parent = await locks.acquire('parent-first');
    await parent.run(async () => {
      child = await locks.acquire('parent-first');
    });
    expect(await parent.release()).toBe(true);
    expect(await locks.isLocked('parent-first')).toBe(true);
    expect(await child.release()).toBe(true);
    expect(await locks.isLocked('parent-first')).toBe(false);
  });
});

describe('shutdown', () => {
  it('close() does not strand a lock handed over to a waiter that is leaving', async () => {
    const s = open();
    const holder = await s.locks.acquire('closing');
    const waiting = s.locks
      .acquire('closing', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await queueLength('closing')) === 1);
    // The release reaches Redis first and hands the lock to the waiter, which
    // close() sends away at the same moment.
    const released = holder.release();
    await s.close();
    expect(await released).toBe(true);
    expect(await waiting).toBeInstanceOf(LockNotAcquiredError);
    expect(await redis.exists('lock:{closing}')).toBe(0);
    expect(await queueLength('closing')).toBe(0);
  });

  it('close() settles acquisitions still on their way and leaves nothing locked', async () => {
    const s = open();
    const rival = open();
    const blocker = await rival.locks.acquire('in-flight-busy');
    const queued = s.locks
      .acquire('in-flight-busy', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    const direct = s.locks
      .acquire('in-flight-free', { waitTime: 0 })
      .catch((error: unknown) => error);
    const started = performance.now();
    await s.close();
    const results = await Promise.all([queued, direct]);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(results[0]).toBeInstanceOf(LockNotAcquiredError);
    expect(results[1]).toBeInstanceOf(LockNotAcquiredError);
    expect(await redis.exists('lock:{in-flight-free}')).toBe(0);
    expect(await queueLength('in-flight-busy')).toBe(0);
    await blocker.release();
    expect(await redis.exists('lock:{in-flight-busy}')).toBe(0);
  });
});

describe('late answers and lost wake-ups', () => {
  // Local: the release hands the lock over in memory. Remote: the short
  // release declines for the queue, so only its late answer can serve it;
  // otherwise the waiter would wait out the holder's 30 s lease.
  it.each([
    ['wakes the local waiter it handed the lock to', 'local'],
    ['serves a waiter in another process', 'remote'],
  ])('a release answered after its timeout still %s', async (_what, where) => {
    const s = open({ commandTimeoutMs: 200 });
    const waiterSide = where === 'local' ? s : open();
    const key = `late-release-${where}`;
    const holder = await s.locks.acquire(key);
    const waiting = waiterSide.locks.acquire(key, { waitTime: 5_000 });
    await eventually(async () => (await queueLength(key)) === 1);
    await redis.call('CLIENT', 'PAUSE', '500', 'WRITE');
    expect(await holder.release().catch((e: unknown) => e)).toBeInstanceOf(
      LockBackendError,
    );
    const started = performance.now();
    const next = await waiting;
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(await next.release()).toBe(true);
  });

  it('hand-offs reach a process whose client has a commandTimeout shorter than the blocking pop', async () => {
    const a = open();
    const b = open({ client: { commandTimeout: 300 } });
    const holder = await a.locks.acquire('short-timeout');
    const waiting = b.locks.acquire('short-timeout', { waitTime: 6_000 });
    await sleep(1_300);
    const started = performance.now();
    await holder.release();
    const next = await waiting;
    expect(performance.now() - started).toBeLessThan(500);
    await next.release();
  });

  it('a late hand-off message never frees the lock its token holds now', async () => {
    const s = open();
    const rival = open();
    // Something else keeps the process listening.
    const blocker = await rival.locks.acquire('stale:other');
    const listening = s.locks
      .acquire('stale:other', { waitTime: 5_000 })
      .catch((error: unknown) => error);
    await eventually(async () => (await queueLength('stale:other')) === 1);
    const { wakeList } = await firstQueued('stale:other');

    // The token holds the key anew (say it was queued again after an earlier
    // hand-off lapsed); the message of that earlier hand-off arrives only now.
    const held = await s.locks.acquire('stale:k');
    const heldFence = await held.fence();
    await redis.rpush(
      wakeList,
      `${held.token}|${heldFence - 1}|lock:{stale:k}`,
    );
    await eventually(async () => (await redis.llen(wakeList)) === 0);
    await sleep(100);
    expect(await redis.get('lock:{stale:k}')).toBe(held.token);
    expect(held.lost).toBe(false);
    expect(await held.release()).toBe(true);
    await blocker.release();
    await ((await listening) as LockHandle).release();
  });

  it('a message about one key is never taken as the grant of another key of the same acquisition', async () => {
    const s = open();
    const rival = open();
    const blocker = await rival.locks.acquire('mk:b');
    const both = s.locks.acquire(['mk:a', 'mk:b'], { waitTime: 3_000 });
    const settled = settledFlag(both);
    await eventually(async () => (await queueLength('mk:b')) === 1);
    const { token, wakeList } = await firstQueued('mk:b');
    expect(await redis.get('lock:{mk:a}')).toBe(token);

    // A late message about key a (from an older hand-off of a to this token).
    await redis.rpush(wakeList, `${token}|0|lock:{mk:a}`);
    await eventually(async () => (await redis.llen(wakeList)) === 0);
    await sleep(100);
    expect(settled()).toBe(false);
    expect(await redis.get('lock:{mk:b}')).toBe(blocker.token);
    expect(await redis.get('lock:{mk:a}')).toBe(token);

    await blocker.release();
    const handle = await both;
    expect(await redis.get('lock:{mk:b}')).toBe(handle.token);
    expect(await handle.release()).toBe(true);
  });
});

/**
 * The holder's process queues three waiters behind one of another process;
 * each waiter records when it got the lock and releases after `holdMs`.
 */
async function handOffOrder(
  localHandoffs: number,
  localHandoffWindowMs: number,
  holdMs = 0,
): Promise<string[]> {
  const here = open({ localHandoffs, localHandoffWindowMs });
  const there = open({ localHandoffs, localHandoffWindowMs });
  const key = `cohort-${localHandoffs}-${localHandoffWindowMs}`;
  const holder = await here.locks.acquire(key);
  const order: string[] = [];
  const queued = async (
    name: string,
    from: Opened,
    position: number,
  ): Promise<{ done: Promise<void> }> => {
    const done = from.locks.using(
      key,
      async () => {
        order.push(name);
        await sleep(holdMs);
      },
      { waitTime: 5_000 },
    );
    await eventually(async () => (await queueLength(key)) === position);
    // Wrapped: an async function returning the promise would wait for it.
    return { done };
  };
  const waits = [
    await queued('remote', there, 1),
    await queued('local-1', here, 2),
    await queued('local-2', here, 3),
    await queued('local-3', here, 4),
  ];
  await holder.release();
  await Promise.all(waits.map((wait) => wait.done));
  await expectOnlyFenceLeft(key);
  return order;
}

/** SET commands Redis ran so far, clients' and scripts' alike. */
async function setCalls(): Promise<number> {
  const stats = await redis.info('commandstats');
  return Number(/cmdstat_set:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe('the uncontended path (a bare SET NX PX)', () => {
  it('gives back a lock whose SET was answered after the acquisition timed out', async () => {
    const s = open({ commandTimeoutMs: 200 });
    const setsBefore = await setCalls();
    await redis.call('CLIENT', 'PAUSE', '500', 'WRITE');
    await expect(
      s.locks.acquire('late-set', { waitTime: 0 }),
    ).rejects.toBeInstanceOf(LockBackendError);
    await eventually(async () => (await setCalls()) > setsBefore);
    // Taken by the late SET, then freed at once rather than at its lease's end.
    await eventually(async () => (await redis.exists('lock:{late-set}')) === 0);
    const next = await open().locks.acquire('late-set', { waitTime: 0 });
    expect(await next.release()).toBe(true);
  });

  it('may let a newcomer take a lock whose holder died ahead of the queue, which its release then serves', async () => {
    const dying = open();
    const queued = open();
    const newcomer = open();
    await dying.locks.acquire('orphan');
    const waiting = queued.locks.acquire('orphan', { waitTime: 5_000 });
    await eventually(async () => (await queueLength('orphan')) === 1);
    // The holder died and its lease ran out, before the waiter's safety check.
    await redis.del('lock:{orphan}');
    const taken = await newcomer.locks.acquire('orphan', { waitTime: 0 });
    expect(await queueLength('orphan')).toBe(1);
    const released = performance.now();
    await taken.release();
    const next = await waiting;
    expect(performance.now() - released).toBeLessThan(300);
    expect(await redis.get('lock:{orphan}')).toBe(next.token);
    await next.release();
  });

  it('is skipped for a second for a key found busy: such a key queues in one round trip', async () => {
    const s = open();
    const rival = open();
    const blocker = await rival.locks.acquire('hot-key');
    expect(await s.locks.tryAcquire('hot-key')).toBeNull();
    const { sent, stop } = await recordClientCommands();
    const waiting = s.locks.acquire('hot-key', { waitTime: 5_000 });
    await eventually(async () => (await queueLength('hot-key')) === 1);
    await blocker.release();
    await (await waiting).release();
    const again = await s.locks.acquire('hot-key', { waitTime: 0 });
    await again.release();
    await (await s.locks.acquire('cold-key')).release();
    // Once the key has not been found busy for a second, it is free-looking
    // again: back to the bare SET.
    await sleep(1_100);
    await (await s.locks.acquire('hot-key', { waitTime: 0 })).release();
    await eventually(
      () => sent.filter((c) => c.startsWith('set ')).length === 2,
    );
    stop();
    expect(sent.filter((c) => c.startsWith('set '))).toEqual([
      expect.stringMatching(/^set lock:\{cold-key\} /),
      expect.stringMatching(/^set lock:\{hot-key\} /),
    ]);
  });
});

/**
 * `here` holds `name` under contention (handed over from the queue, with
 * `holderLease` when given) while `count` more of its callers wait for it.
 * They wait in memory, not in Redis's queue: the lock is passed on here.
 */
async function heldWithLocalWaiters(
  here: Opened,
  name: string,
  count: number,
  options: { leaseTime?: number; holderLease?: number } = {},
): Promise<{ holder: LockHandle; waiting: Promise<LockHandle>[] }> {
  const first = await here.locks.acquire(name);
  const second = here.locks.acquire(name, {
    waitTime: 5_000,
    leaseTime: options.holderLease,
  });
  await eventually(async () => (await queueLength(name)) === 1);
  await first.release();
  const holder = await second;
  const waiting: Promise<LockHandle>[] = [];
  for (let i = 1; i <= count; i += 1) {
    waiting.push(
      here.locks.acquire(name, {
        waitTime: 5_000,
        leaseTime: options.leaseTime,
      }),
    );
    await eventually(() => internals(here.backend).waiters.size === i);
  }
  return { holder, waiting };
}

describe('local hand-offs (lock cohorting)', () => {
  // Waiters in the releasing process may pass the oldest waiter (in another
  // process) at most localHandoffs times in a row; 0 is first come, first served.
  // A wide window here, so that only the count decides.
  it.each([
    [0, ['remote', 'local-1', 'local-2', 'local-3']],
    [1, ['local-1', 'remote', 'local-2', 'local-3']],
    [2, ['local-1', 'local-2', 'remote', 'local-3']],
  ] as const)(
    'with localHandoffs %i, serves %j',
    async (localHandoffs, expected) => {
      expect(await handOffOrder(localHandoffs, 60_000)).toEqual(expected);
    },
  );

  it('passes the oldest waiter only within the window from the first pass', async () => {
    // Each hold outlasts the window: one pass, then the oldest waiter's turn.
    expect(await handOffOrder(8, 50, 120)).toEqual([
      'local-1',
      'remote',
      'local-2',
      'local-3',
    ]);
  });

  it('keeps an expiry on a queue that a pass emptied and refilled', async () => {
    const here = open();
    const there = open();
    const holder = await here.locks.acquire('cohort-ttl');
    const remote = there.locks.acquire('cohort-ttl', { waitTime: 4_000 });
    await eventually(async () => (await queueLength('cohort-ttl')) === 1);
    const local = here.locks.acquire('cohort-ttl', { waitTime: 4_000 });
    await eventually(async () => (await queueLength('cohort-ttl')) === 2);
    await holder.release();
    // The local waiter passed the remote one: the queue was emptied by taking
    // it out and made anew by putting the remote entry back.
    const passed = await local;
    expect(await queueLength('cohort-ttl')).toBe(1);
    const ttl = await redis.pttl('lock:{cohort-ttl}:queue');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(4_000 + 1_000);
    expect(await redis.pttl('lock:{cohort-ttl}:bypass')).toBeGreaterThan(0);
    await passed.release();
    await (await remote).release();
    await expectOnlyFenceLeft('cohort-ttl');
  });

  it('is strictly first come, first served with a zero window', async () => {
    expect(await handOffOrder(8, 0)).toEqual([
      'remote',
      'local-1',
      'local-2',
      'local-3',
    ]);
  });

  it('passes a held lock to a waiter of the same process in memory, which then holds it fully', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(
      here,
      'in-memory',
      1,
    );
    const holderFence = await holder.fence();
    const { sent, stop } = await recordClientCommands();
    await sleep(50);
    const passedAt = performance.now();
    const released = holder.release();
    const next = await waiting[0];
    // Handed over before Redis heard of it: the release answers afterwards.
    expect(settledFlag(released)()).toBe(false);
    expect(performance.now() - passedAt).toBeLessThan(100);
    expect(await released).toBe(true);
    stop();
    // Nothing was pushed to a wake list: the waiter was served in memory.
    expect(sent.filter((c) => c.startsWith('rpush'))).toEqual([]);
    // Stored under the token it was handed to in Redis; its entry left the queue.
    expect(await redis.get('lock:{in-memory}')).toBe(holder.token);
    expect(await queueLength('in-memory')).toBe(0);
    // The new holder extends, fences and releases it as its own; the old one
    // can do none of that any more.
    expect(await next.extend(20_000)).toBe(true);
    expect(await redis.pttl('lock:{in-memory}')).toBeGreaterThan(15_000);
    expect(await next.fence()).toBeGreaterThan(holderFence);
    expect(
      await here.backend.extend('lock:{in-memory}', holder.token, 1_000),
    ).toBe(false);
    expect(
      await here.backend.fence('lock:{in-memory}', holder.token),
    ).toBeUndefined();
    expect(await here.backend.release('lock:{in-memory}', holder.token)).toBe(
      false,
    );
    expect(await next.release()).toBe(true);
    await expectOnlyFenceLeft('in-memory');
    expectNothingLeft(here.backend);
  });

  it('sets the lease the new holder asked for when it passes the lock in memory', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(
      here,
      'pass-lease',
      1,
      {
        leaseTime: 400,
      },
    );
    expect(await redis.pttl('lock:{pass-lease}')).toBeGreaterThan(1_000);
    await holder.release();
    const next = await waiting[0];
    expect(await redis.pttl('lock:{pass-lease}')).toBeLessThanOrEqual(400);
    // An explicit lease is not renewed: it ends, and the holder is told.
    await eventually(() => next.lost, 2_000);
    await eventually(
      async () => (await redis.exists('lock:{pass-lease}')) === 0,
      500,
    );
    expect(await next.release()).toBe(false);
    expectNothingLeft(here.backend);
  });

  it('a caller finding the lock held here waits in memory; if the lock goes elsewhere, it queues in Redis', async () => {
    const here = open({ localHandoffs: 1, localHandoffWindowMs: 60_000 });
    const there = open({ localHandoffs: 1, localHandoffWindowMs: 60_000 });
    const { holder, waiting } = await heldWithLocalWaiters(here, 'behind', 1);
    expect(await queueLength('behind')).toBe(0);
    const order: string[] = [];
    const remote = there.locks.using('behind', () => order.push('remote'));
    await eventually(async () => (await queueLength('behind')) === 1);
    await holder.release();
    // The one pass allowed: the waiter here goes ahead of the remote one.
    const first = await waiting[0];
    order.push('here-1');
    const second = here.locks.using('behind', () => order.push('here-2'));
    await eventually(() => internals(here.backend).waiters.size === 1);
    expect(await queueLength('behind')).toBe(1);
    // No more passes: the lock goes to the remote waiter, and the one waiting
    // here joins the queue behind it.
    await first.release();
    await Promise.all([remote, second]);
    expect(order).toEqual(['here-1', 'remote', 'here-2']);
    await expectOnlyFenceLeft('behind');
    expectNothingLeft(here.backend);
    expectNothingLeft(there.backend);
  });

  it('when no more passes are allowed and nobody queues in Redis, the release itself serves a caller waiting here', async () => {
    const here = open({ localHandoffs: 1, localHandoffWindowMs: 60_000 });
    const { holder, waiting } = await heldWithLocalWaiters(
      here,
      'successor',
      2,
    );
    await holder.release();
    // The one pass allowed, in memory.
    const first = await waiting[0];
    const { sent, stop } = await recordClientCommands();
    await sleep(50);
    await first.release();
    const second = await waiting[1];
    await sleep(50);
    stop();
    // One script call: the release, which granted the lock to the waiter
    // here, rather than a release and then an acquisition of its own.
    expect(
      sent
        .filter((command) => command.startsWith('eval'))
        .map((command) => command.split(' ')[0]),
    ).toEqual(['evalsha']);
    expect(await redis.get('lock:{successor}')).toBe(second.token);
    expect(await second.release()).toBe(true);
    await expectOnlyFenceLeft('successor');
    expectNothingLeft(here.backend);
  });

  it('a caller waiting in memory gives up in time, and leaves nothing behind', async () => {
    const here = open();
    const { holder } = await heldWithLocalWaiters(here, 'behind-timeout', 0);
    const started = performance.now();
    const attempt = here.locks
      .acquire('behind-timeout', { waitTime: 200 })
      .catch((error: unknown) => error);
    await eventually(() => internals(here.backend).waiters.size === 1);
    expect(await queueLength('behind-timeout')).toBe(0);
    expect(await attempt).toBeInstanceOf(LockNotAcquiredError);
    expect(performance.now() - started).toBeLessThan(1_000);
    const controller = new AbortController();
    const aborted = here.locks
      .acquire('behind-timeout', { waitTime: 5_000, signal: controller.signal })
      .catch((error: unknown) => error);
    await eventually(() => internals(here.backend).waiters.size === 1);
    controller.abort();
    expect(await aborted).toBeInstanceOf(LockNotAcquiredError);
    expect(await holder.release()).toBe(true);
    await expectOnlyFenceLeft('behind-timeout');
    expectNothingLeft(here.backend);
  });

  it('a caller waiting in memory behind a lease that ends unreleased gets the lock soon after', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(
      here,
      'behind-expiry',
      1,
      { holderLease: 300 },
    );
    const next = await waiting[0];
    expect(holder.lost).toBe(true);
    expect(await redis.get('lock:{behind-expiry}')).toBe(next.token);
    expect(await next.release()).toBe(true);
    expect(await holder.release()).toBe(false);
    expectNothingLeft(here.backend);
  });

  it('counts passes in memory toward localHandoffs: a remote waiter is served after them', async () => {
    const here = open({ localHandoffs: 2, localHandoffWindowMs: 60_000 });
    const there = open({ localHandoffs: 2, localHandoffWindowMs: 60_000 });
    // A third process's: its release serves the queue's head.
    const blocker = await open().locks.acquire('mixed');
    const order: string[] = [];
    const track = (name: string, from: Opened) =>
      from.locks.using('mixed', async () => {
        order.push(name);
      });
    // here's first waiter comes before the remote one; then three more of here's.
    const waits = [track('here-1', here)];
    await eventually(async () => (await queueLength('mixed')) === 1);
    waits.push(track('remote', there));
    await eventually(async () => (await queueLength('mixed')) === 2);
    for (const name of ['here-2', 'here-3', 'here-4']) {
      waits.push(track(name, here));
      await eventually(
        async () => (await queueLength('mixed')) === waits.length,
      );
    }
    await blocker.release();
    await Promise.all(waits);
    // here-1 is the head's turn; here-2 and here-3 pass the remote waiter (in
    // memory), which is then served before here-4.
    expect(order).toEqual(['here-1', 'here-2', 'here-3', 'remote', 'here-4']);
    expectNothingLeft(here.backend);
    expectNothingLeft(there.backend);
  });
});

describe('client key prefix and script cache', () => {
  it('hands over across processes and within one when the client has a keyPrefix', async () => {
    const a = open({ client: { keyPrefix: 'app:' } });
    const b = open({ client: { keyPrefix: 'app:' } });
    const holder = await a.locks.acquire('pfx');
    expect(await redis.get('app:lock:{pfx}')).toBe(holder.token);
    const remote = b.locks.acquire('pfx', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('app:lock:{pfx}:queue')) === 1,
    );
    const local = a.locks.acquire('pfx', { waitTime: 5_000 });
    await eventually(
      async () => (await redis.llen('app:lock:{pfx}:queue')) === 2,
    );

    // The waiter in the releasing process goes first (a local hand-off, in
    // memory), then the older one in the other process.
    let started = performance.now();
    await holder.release();
    const first = await local;
    expect(performance.now() - started).toBeLessThan(300);
    const firstFence = await first.fence();
    started = performance.now();
    await first.release();
    const second = await remote;
    expect(performance.now() - started).toBeLessThan(300);
    expect(await second.fence()).toBeGreaterThan(firstFence);
    await second.release();
    expect(await redis.keys('lock:*')).toEqual([]);
    expect(await redis.exists('app:lock:{pfx}')).toBe(0);
  });

  it('keeps working after the script cache is flushed, also for a waiter in the queue', async () => {
    const a = open();
    const b = open();
    const holder = await a.locks.acquire('noscript');
    const holderFence = await holder.fence();
    const waiting = b.locks.acquire('noscript', { waitTime: 5_000 });
    await eventually(async () => (await queueLength('noscript')) === 1);
    await redis.script('FLUSH');
    await holder.release();
    const next = await waiting;
    const nextFence = await next.fence();
    await redis.script('FLUSH');
    expect(await next.release()).toBe(true);
    await redis.script('FLUSH');
    const again = await a.locks.acquire('noscript', { waitTime: 0 });
    expect(await again.fence()).toBeGreaterThan(nextFence);
    expect(nextFence).toBeGreaterThan(holderFence);
    await again.release();
  });
});

describe('killed processes and restarts', () => {
  it('waiters get the lock of a SIGKILLed holder within its lease, in order, with rising fences', async () => {
    const child = spawnTs(
      'libs/distributed-lock/test/workers/doomed-holder.ts',
      [server.url, 'killed-holder', '600'],
    );
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await eventually(() => out.includes('acquired'), 20_000);
    const services = [open({ handoffLeaseMs: 500 }), open(), open()];
    const order: number[] = [];
    const fences: number[] = [];
    const waits: Promise<void>[] = [];
    for (const [index, s] of services.entries()) {
      waits.push(
        s.locks.using(
          'killed-holder',
          async (lock) => {
            order.push(index);
            fences.push(await lock.fence());
          },
          { waitTime: 5_000 },
        ),
      );
      await eventually(
        async () => (await queueLength('killed-holder')) === index + 1,
      );
    }
    const killedHolderFence = Number(
      await redis.get('lock:{killed-holder}:fence'),
    );
    child.kill('SIGKILL');
    const killedAt = performance.now();
    await Promise.all(waits);
    expect(performance.now() - killedAt).toBeLessThan(600 + 3_000);
    expect(order).toEqual([0, 1, 2]);
    expect(fences[0]).toBeGreaterThan(killedHolderFence);
    expect(fences[1]).toBeGreaterThan(fences[0]);
    expect(fences[2]).toBeGreaterThan(fences[1]);
  });

  it('a waiter whose queue entry vanished in a restart queues again while others keep the key busy', async () => {
    const own = await startRedisServer();
    const probe = new Redis(own.url);
    probe.on('error', () => undefined);
    const stop = new AbortController();
    const busyLoops: Promise<void>[] = [];
    try {
      const settings = { url: own.url, handoffLeaseMs: 300 };
      const a = open(settings);
      const b = open(settings);
      const holder = open(settings);
      await holder.locks.acquire('vanished', { leaseTime: 10_000 });
      const waiting = a.locks
        .acquire('vanished', { waitTime: 4_000 })
        .catch((error: unknown) => error);
      await eventually(
        async () => (await probe.llen('lock:{vanished}:queue')) === 1,
      );
      await own.restart();
      const restartedAt = performance.now();
      // From now on b holds the key or has someone queued for it nearly always.
      for (let i = 0; i < 2; i++) {
        busyLoops.push(
          (async () => {
            while (!stop.signal.aborted) {
              await b.locks
                .using('vanished', () => sleep(20), { waitTime: 2_000 })
                .catch(() => sleep(20));
            }
          })(),
        );
      }
      const result = await waiting;
      expect(result).not.toBeInstanceOf(Error);
      expect(performance.now() - restartedAt).toBeLessThan(2_000);
      await (result as LockHandle).release();
    } finally {
      stop.abort();
      await Promise.all(busyLoops);
      probe.disconnect();
      await own.stop();
    }
  });

  // Redis here keeps no data across a restart, and the fencing counter goes
  // with it: tokens are seeded from the server clock so they still rise.
  it('fencing tokens keep rising across a Redis restart', async () => {
    const own = await startRedisServer();
    try {
      const { locks } = open({ url: own.url });
      let last = 0;
      for (let i = 0; i < 3; i++) {
        const handle = await locks.acquire('fence-restart');
        last = await handle.fence();
        await handle.release();
      }
      await own.restart();
      let after: LockHandle | undefined;
      await eventually(async () => {
        after = await locks
          .acquire('fence-restart', { waitTime: 0 })
          .catch(() => undefined);
        return after !== undefined;
      });
      expect(await after?.fence()).toBeGreaterThan(last);
    } finally {
      await own.stop();
    }
  });

  it('the blocking connection does not report unhandled errors while Redis is away', async () => {
    const own = await startRedisServer();
    const probe = new Redis(own.url);
    const errors = vi
      .spyOn(console, 'error')
      .mockImplementation(() => undefined);
    try {
      const a = open({ url: own.url, commandTimeoutMs: 300 });
      const b = open({ url: own.url, commandTimeoutMs: 300 });
      await a.locks.acquire('away', { leaseTime: 10_000 });
      const waiting = b.locks
        .acquire('away', { waitTime: 1_000 })
        .catch((error: unknown) => error);
      await eventually(
        async () => (await probe.llen('lock:{away}:queue')) === 1,
      );
      probe.disconnect();
      await own.stop();
      await sleep(500);
      await own.restart();
      await waiting;
      const unhandled = errors.mock.calls.filter((call) =>
        String(call[0]).includes('Unhandled error event'),
      );
      expect(unhandled).toEqual([]);
    } finally {
      probe.disconnect();
      await own.stop();
    }
  });
});

interface StressOptions {
  readonly services: Opened[];
  readonly loopsPerService: number;
  /** Keys of one acquisition. */
  readonly pickKeys: () => string[];
  /** Run until this returns true (checked before each iteration). */
  readonly done: (iteration: number) => boolean;
  readonly commandTimeoutMs: number;
  /** Chance that an acquisition uses this explicit lease instead of the watchdog. */
  readonly explicitLease?: { chance: number; leaseTime: number };
}

interface StressResult {
  acquired: number;
  busy: number;
  aborted: number;
  backendErrors: number;
  unexpected: unknown[];
  /** Overlapping holders, with when they were seen. */
  violations: Array<{ key: string; at: number }>;
  /** Per key, fencing tokens in the order the critical sections started, with when. */
  fences: Map<string, Array<{ fence: number; at: number }>>;
  /** Acquisitions that settled later than their wait time allows. */
  overdue: Array<{ waitTime: number; tookMs: number }>;
}

/** 0 (try once), a short wait that often runs out, or a longer one. */
function pickWait(): number {
  const r = Math.random();
  if (r < 0.15) return 0;
  if (r < 0.55) return 1 + Math.floor(Math.random() * 20);
  return 50 + Math.floor(Math.random() * 350);
}

/**
 * Many callers in several services fight over a few keys with short random
 * waits (some time out, some are aborted) and 0-3 ms holds, and record anyone
 * found inside a critical section that someone else is in.
 */
async function stress(options: StressOptions): Promise<StressResult> {
  const result: StressResult = {
    acquired: 0,
    busy: 0,
    aborted: 0,
    backendErrors: 0,
    unexpected: [],
    violations: [],
    fences: new Map(),
    overdue: [],
  };
  const inside = new Map<string, number>();
  async function once(locks: LockService): Promise<void> {
    const keys = options.pickKeys();
    const waitTime = pickWait();
    const controller = Math.random() < 0.15 ? new AbortController() : undefined;
    if (controller) {
      setTimeout(() => controller.abort(), Math.random() * 15);
      result.aborted++;
    }
    const explicit = options.explicitLease;
    const leaseTime =
      explicit && Math.random() < explicit.chance
        ? explicit.leaseTime
        : undefined;
    const started = performance.now();
    let handle: LockHandle;
    try {
      handle = await locks.acquire(keys, {
        waitTime,
        leaseTime,
        signal: controller?.signal,
      });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) result.busy++;
      else if (error instanceof LockBackendError) result.backendErrors++;
      else result.unexpected.push(error);
      return;
    } finally {
      const tookMs = performance.now() - started;
      // The bare SET, one call to queue, the wait, one call to leave the
      // queue (the service may make one such round per key).
      if (tookMs > waitTime + 3 * options.commandTimeoutMs * keys.length + 300)
        result.overdue.push({ waitTime, tookMs });
    }
    result.acquired++;
    let fences: ReadonlyMap<string, number>;
    try {
      fences = await handle.fences();
    } catch (error) {
      // Lost before its token was issued (Redis restarted): it gets none.
      if (error instanceof LockBackendError) result.backendErrors++;
      else if (!(error instanceof LockLostError)) result.unexpected.push(error);
      await handle.release().catch(() => undefined);
      return;
    }
    const at = performance.now();
    for (const key of keys) {
      if ((inside.get(key) ?? 0) > 0) result.violations.push({ key, at });
      inside.set(key, (inside.get(key) ?? 0) + 1);
      let seen = result.fences.get(key);
      if (!seen) result.fences.set(key, (seen = []));
      seen.push({ fence: fences.get(key) ?? -1, at });
    }
    const hold = Math.floor(Math.random() * 4);
    await (hold === 0 ? Promise.resolve() : sleep(hold));
    if (handle.lost) result.unexpected.push(new Error('lost while held'));
    for (const key of keys) inside.set(key, (inside.get(key) ?? 0) - 1);
    try {
      await handle.release();
    } catch (error) {
      if (error instanceof LockBackendError) result.backendErrors++;
      else result.unexpected.push(error);
    }
  }

  await Promise.all(
    options.services.flatMap(({ locks }) =>
      Array.from({ length: options.loopsPerService }, async () => {
        for (let i = 0; !options.done(i); i++) await once(locks);
      }),
    ),
  );
  if (process.env.STRESS_DEBUG)
    console.log(
      JSON.stringify({
        ...result,
        fences: [...result.fences].map(([k, v]) => [k, v.length]),
      }),
    );
  return result;
}

function expectRisingFences(
  fences: Map<string, Array<{ fence: number; at: number }>>,
  from = 0,
): void {
  for (const [key, seen] of fences) {
    const after = seen.filter((s) => s.at >= from).map((s) => s.fence);
    for (let i = 1; i < after.length; i++) {
      if (!(after[i] > after[i - 1])) {
        throw new Error(
          `fencing tokens of ${key} do not rise: ${after.slice(Math.max(0, i - 3), i + 3).join(', ')}`,
        );
      }
    }
  }
}

describe('stress', () => {
  it('3 services x 10 callers on one key: one holder at a time, rising fences, nothing left over', async () => {
    const commandTimeoutMs = 2_000;
    const services = [open(), open(), open()];
    const result = await stress({
      services,
      loopsPerService: 10,
      pickKeys: () => ['hot'],
      done: (i) => i >= 100,
      commandTimeoutMs,
    });
    expect(result.unexpected).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.overdue).toEqual([]);
    expect(result.backendErrors).toBe(0);
    expect(result.acquired).toBeGreaterThan(100);
    expect(result.busy).toBeGreaterThan(0);
    expectRisingFences(result.fences);
    expect(await redis.exists('lock:{hot}')).toBe(0);
    await eventually(async () => (await queueLength('hot')) === 0, 2_000);
    await sleep(50);
    for (const { backend } of services) expectNothingLeft(backend);
  });

  it('3 services x 10 callers on overlapping key sets, short hand-off leases, some explicit leases: per-key exclusion and rising fences', async () => {
    const commandTimeoutMs = 2_000;
    const services = [
      open({ handoffLeaseMs: 150 }),
      open({ handoffLeaseMs: 150 }),
      open(),
    ];
    const names = ['p', 'q', 'r'];
    const result = await stress({
      services,
      loopsPerService: 10,
      pickKeys: () => {
        const first = names[Math.floor(Math.random() * names.length)];
        if (Math.random() < 0.5) return [first];
        const second = names[Math.floor(Math.random() * names.length)];
        return [...new Set([first, second])];
      },
      done: (i) => i >= 80,
      commandTimeoutMs,
      explicitLease: { chance: 0.4, leaseTime: 250 },
    });
    expect(result.unexpected).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.overdue).toEqual([]);
    expect(result.acquired).toBeGreaterThan(100);
    expectRisingFences(result.fences);
    for (const name of names) {
      expect(await redis.exists(`lock:{${name}}`)).toBe(0);
      await eventually(async () => (await queueLength(name)) === 0, 2_000);
    }
    await sleep(50);
    for (const { backend } of services) expectNothingLeft(backend);
  });

  it('recovers from a Redis restart in the middle of contention', async () => {
    const own = await startRedisServer();
    try {
      const commandTimeoutMs = 400;
      const settings = {
        url: own.url,
        commandTimeoutMs,
        handoffLeaseMs: 300,
        watchdogLeaseTime: 600,
      };
      const services = [open(settings), open(settings), open(settings)];
      const start = performance.now();
      let restartedAt = Number.POSITIVE_INFINITY;
      const restart = (async () => {
        await sleep(700);
        await own.restart();
        restartedAt = performance.now();
      })();
      const result = await stress({
        services,
        loopsPerService: 10,
        pickKeys: () => ['restart'],
        done: () => performance.now() > restartedAt + 2_000,
        commandTimeoutMs,
      });
      await restart;
      expect(performance.now() - start).toBeLessThan(8_000);
      expect(result.unexpected).toEqual([]);
      expect(result.overdue).toEqual([]);
      // Held locks vanish with the data; once the old holders' leases have
      // run out, one holder at a time again, and the fences rise again
      // (from 1: the counter was lost too).
      const settled = restartedAt + 600 + 300;
      expect(result.violations.filter((v) => v.at > settled)).toEqual([]);
      expectRisingFences(result.fences, settled);
      const after = result.fences.get('restart')?.filter((s) => s.at > settled);
      expect(after?.length ?? 0).toBeGreaterThan(20);
      // Every service works normally afterwards.
      for (const { locks } of services) {
        const handle = await locks.acquire('restart', { waitTime: 2_000 });
        expect(await handle.release()).toBe(true);
      }
      await sleep(100);
      for (const { backend } of services) expectNothingLeft(backend);
    } finally {
      await own.stop();
    }
  });
});
