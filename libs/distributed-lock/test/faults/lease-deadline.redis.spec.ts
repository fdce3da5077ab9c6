/**
 * A hold's local deadline: the send time of the last command that set its
 * lease, plus the lease, less a drift allowance. The holder is told "lost"
 * then, before Redis can expire the key and another process take it, however
 * long a renewal stuck in a frozen connection takes to fail.
 */
import { Redis } from 'ioredis';
import type { LockLostEvent } from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import {
  openLocks,
  type OpenedLocks,
  type OpenLocksOptions,
} from '../../../../test/support/lock-clients.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import {
  startTcpProxy,
  type TcpProxy,
} from '../../../../test/support/tcp-proxy.js';

let server: RedisServerHandle;
let redis: Redis;
let proxy: TcpProxy;
const opened: OpenedLocks[] = [];

function open(url: string, options: OpenLocksOptions = {}): OpenedLocks {
  const s = openLocks(url, options);
  opened.push(s);
  return s;
}

/** Records when each `lost` event came (ms since epoch). */
function lostTimes(s: OpenedLocks): Array<LockLostEvent & { at: number }> {
  const lost: Array<LockLostEvent & { at: number }> = [];
  s.locks.events.on('lost', (event) => lost.push({ ...event, at: Date.now() }));
  return lost;
}

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});

beforeEach(async () => {
  proxy = await startTcpProxy({ targetPort: server.port });
});

afterEach(async () => {
  proxy.thaw();
  await Promise.all(opened.splice(0).map((s) => s.close()));
  await proxy.close();
  await redis.flushall();
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describe('a watchdog holder cut off from Redis', () => {
  it('is told "lost" before another process gets the lock', async () => {
    // The default command timeout (2 s) is longer than the lease: a renewal
    // stuck in the frozen connection fails only after the lease has ended.
    const holder = open(proxy.url, { watchdogLeaseTime: 1_500 });
    const lost = lostTimes(holder);
    const handle = await holder.locks.acquire('cut-off');
    await sleep(600);
    proxy.freeze();
    const rival = open(server.url);
    const taken = await rival.locks.acquire('cut-off', { waitTime: 10_000 });
    const takenAt = Date.now();
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ key: 'cut-off', reason: 'renewal-failed' });
    expect(lost[0].at).toBeLessThanOrEqual(takenAt);
    expect(handle.lost).toBe(true);
    expect(handle.signal.aborted).toBe(true);
    await taken.release();
  });
});

describe('extend()', () => {
  it('on a watchdog hold sets the lease the watchdog renews to from then on', async () => {
    const s = open(server.url);
    const lost = lostTimes(s);
    const handle = await s.locks.acquire('watchdog-extend');
    expect(await redis.pttl('lock:{watchdog-extend}')).toBeGreaterThan(20_000);
    expect(await handle.extend(600)).toBe(true);
    expect(await redis.pttl('lock:{watchdog-extend}')).toBeLessThanOrEqual(600);
    expect(handle.expiresAt - Date.now()).toBeLessThanOrEqual(600);
    // Three times the new lease later, the watchdog has kept it alive.
    await sleep(1_800);
    expect(await redis.get('lock:{watchdog-extend}')).toBe(handle.token);
    expect(await redis.pttl('lock:{watchdog-extend}')).toBeLessThanOrEqual(600);
    const rival = open(server.url);
    expect(await rival.locks.tryAcquire('watchdog-extend')).toBeNull();
    expect(lost).toEqual([]);
    expect(await handle.release()).toBe(true);
  });

  it('on an explicit lease sets it once: the holder is told "lost" at its end, before the key is gone', async () => {
    const s = open(server.url);
    const lost = lostTimes(s);
    const handle = await s.locks.acquire('explicit-extend', {
      leaseTime: 10_000,
    });
    const sentAt = Date.now();
    expect(await handle.extend(600)).toBe(true);
    expect(handle.expiresAt - sentAt).toBeLessThanOrEqual(600);
    // Told first: the key expires in Redis no earlier than the lease after
    // the send, and is seen gone later still.
    await eventually(
      async () => (await redis.exists('lock:{explicit-extend}')) === 0,
      2_000,
    );
    const goneAt = Date.now();
    expect(lost).toHaveLength(1);
    expect(lost[0].reason).toBe('lease-expired');
    expect(lost[0].at - sentAt).toBeLessThan(600);
    expect(lost[0].at).toBeLessThanOrEqual(goneAt);
    expect(await handle.release()).toBe(false);
  });
});
