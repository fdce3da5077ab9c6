/**
 * A hold's local deadline: the send time of the last command that set its
 * lease, plus the lease, less a drift allowance. The holder is told "lost"
 * then, before Redis can expire the key and another process take it, however
 * long a renewal stuck in a frozen connection takes to fail.
 */
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { recordLost } from '../../../../test/support/lock-clients.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const fixture = useRedisFixture({ proxy: true });

describe('a watchdog holder cut off from Redis', () => {
  it('is told "lost" before another process gets the lock', async () => {
    // The default command timeout (2 s) is longer than the lease: a renewal
    // stuck in the frozen connection fails only after the lease has ended.
    const holder = fixture.open({
      url: fixture.proxy.url,
      watchdogLeaseTime: 1_500,
    });
    const lost = recordLost(holder);
    const handle = await holder.locks.acquire('cut-off');
    await sleep(600);
    fixture.proxy.freeze();
    const rival = fixture.open();
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
    const s = fixture.open();
    const lost = recordLost(s);
    const handle = await s.locks.acquire('watchdog-extend');
    expect(await fixture.redis.pttl('lock:{watchdog-extend}')).toBeGreaterThan(
      20_000,
    );
    expect(await handle.extend(600)).toBe(true);
    expect(
      await fixture.redis.pttl('lock:{watchdog-extend}'),
    ).toBeLessThanOrEqual(600);
    expect(handle.expiresAt - Date.now()).toBeLessThanOrEqual(600);
    // Three times the new lease later, the watchdog has kept it alive.
    await sleep(1_800);
    expect(await fixture.redis.get('lock:{watchdog-extend}')).toBe(
      handle.token,
    );
    expect(
      await fixture.redis.pttl('lock:{watchdog-extend}'),
    ).toBeLessThanOrEqual(600);
    const rival = fixture.open();
    expect(await rival.locks.tryAcquire('watchdog-extend')).toBeNull();
    expect(lost).toEqual([]);
    expect(await handle.release()).toBe(true);
  });

  it('on an explicit lease sets it once: the holder is told "lost" at its end, before the key is gone', async () => {
    const s = fixture.open();
    const lost = recordLost(s);
    const handle = await s.locks.acquire('explicit-extend', {
      leaseTime: 10_000,
    });
    const sentAt = Date.now();
    expect(await handle.extend(600)).toBe(true);
    expect(handle.expiresAt - sentAt).toBeLessThanOrEqual(600);
    // At the lease's end the hold reads lost, whether or not its timer has
    // fired yet (on a loaded machine it may fire tens of ms late: promise 3).
    await sleep(Math.max(0, sentAt + 600 - Date.now()));
    expect(handle.lost).toBe(true);
    // Told first: the key expires in Redis no earlier than the lease after
    // the send, and is seen gone later still.
    await eventually(
      async () => (await fixture.redis.exists('lock:{explicit-extend}')) === 0,
      2_000,
    );
    const goneAt = Date.now();
    expect(lost).toHaveLength(1);
    expect(lost[0].reason).toBe('lease-expired');
    expect(lost[0].at).toBeLessThanOrEqual(goneAt);
    expect(await handle.release()).toBe(false);
  });

  it('on an explicit lease handed over short is not undone by the top-up that was due', async () => {
    const s = fixture.open({ handoffLeaseMs: 300 });
    const rival = fixture.open();
    const blocker = await rival.locks.acquire('explicit-top-up');
    const waiting = s.locks.acquire('explicit-top-up', {
      leaseTime: 2_000,
      waitTime: 5_000,
    });
    await eventually(
      async () =>
        (await fixture.redis.llen('lock:{explicit-top-up}:queue')) === 1,
    );
    await blocker.release();
    // Handed over with the 300 ms hand-off lease: a top-up to 2 s is due
    // within a third of it.
    const handle = await waiting;
    expect(await handle.extend(5_000)).toBe(true);
    await sleep(300);
    expect(await fixture.redis.pttl('lock:{explicit-top-up}')).toBeGreaterThan(
      4_000,
    );
    expect(await handle.release()).toBe(true);
  });
});
