/**
 * Local hand-offs (lock cohorting) in memory: a release passing the lock to a
 * caller of its own process that waits in memory, not in Redis's queue, and
 * how such a caller gives up, outlives a lapsed lease or joins the queue.
 */
import { LockNotAcquiredError, type LockHandle } from '@app/distributed-lock';
import { expectNothingLeft } from '../../../../test/support/backend-internals.js';
import {
  waitingIn,
  type OpenedLocks,
} from '../../../../test/support/lock-clients.js';
import {
  eventually,
  settledFlag,
  sleep,
} from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength, expectOnlyFenceLeft, recordClientCommands } =
  fixture;

/**
 * `here` holds `name` under contention (handed over from the queue, with
 * `holderLease` when given) while `count` more of its callers wait for it.
 * They wait in memory, not in Redis's queue: the lock is passed on here.
 */
async function heldWithLocalWaiters(
  here: OpenedLocks,
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
    await eventually(() => waitingIn(here.backend) === i);
  }
  return { holder, waiting };
}

/** The script calls among `sent` commands, by verb (`eval` or `evalsha`). */
function scriptCalls(sent: readonly string[]): string[] {
  return sent
    .filter((command) => command.startsWith('eval'))
    .map((command) => command.split(' ')[0]);
}

describe('local hand-offs (lock cohorting)', () => {
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
    expect(await fixture.redis.get('lock:{in-memory}')).toBe(holder.token);
    expect(await queueLength('in-memory')).toBe(0);
    // The new holder extends, fences and releases it as its own; the old one
    // can do none of that any more.
    expect(await next.extend(20_000)).toBe(true);
    expect(await fixture.redis.pttl('lock:{in-memory}')).toBeGreaterThan(
      15_000,
    );
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

  it('leaves the queue alone when the waiter it passes the lock to never queued in Redis', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(here, 'no-entry', 1);
    await fixture.redis.config('RESETSTAT');
    await holder.release();
    const next = await waiting[0];
    // Passed in memory (still stored under the first token), and no LREM:
    // that scans the whole queue, remote waiters' entries included.
    expect(await fixture.redis.get('lock:{no-entry}')).toBe(holder.token);
    const stats = await fixture.redis.info('commandstats');
    // The pass-on script ran (its PEXPIRE set the new holder's lease).
    expect(stats).toMatch(/cmdstat_pexpire:calls=[1-9]/);
    expect(stats).not.toMatch(/cmdstat_lrem:/);
    expect(await next.release()).toBe(true);
    await expectOnlyFenceLeft('no-entry');
  });

  it('passes the lock to a waiter that never queued without looking at the queue at all', async () => {
    const here = open();
    const { holder, waiting } = await heldWithLocalWaiters(here, 'no-look', 1);
    await fixture.redis.config('RESETSTAT');
    await holder.release();
    const next = await waiting[0];
    const stats = await fixture.redis.info('commandstats');
    // The holder's check and the new lease; the queue it took nothing out of
    // is left unread, and so is the record of passes over its head.
    expect(stats).toMatch(/cmdstat_get:calls=1,/);
    expect(stats).toMatch(/cmdstat_pexpire:calls=1,/);
    expect(stats).not.toMatch(/cmdstat_exists:/);
    expect(stats).not.toMatch(/cmdstat_del:/);
    expect(await next.release()).toBe(true);
    await expectOnlyFenceLeft('no-look');
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
    expect(await fixture.redis.pttl('lock:{pass-lease}')).toBeGreaterThan(
      1_000,
    );
    await holder.release();
    const next = await waiting[0];
    expect(await fixture.redis.pttl('lock:{pass-lease}')).toBeLessThanOrEqual(
      400,
    );
    // An explicit lease is not renewed: it ends, and the holder is told.
    await eventually(() => next.lost, 2_000);
    await eventually(
      async () => (await fixture.redis.exists('lock:{pass-lease}')) === 0,
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
    await eventually(() => waitingIn(here.backend) === 1);
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
    expect(scriptCalls(sent)).toEqual(['evalsha']);
    expect(await fixture.redis.get('lock:{successor}')).toBe(second.token);
    expect(await second.release()).toBe(true);
    await expectOnlyFenceLeft('successor');
    expectNothingLeft(here.backend);
  });

  it('a caller asking while the release through Redis is on its way waits in memory behind it, not in Redis', async () => {
    const here = open({ localHandoffs: 1, localHandoffWindowMs: 60_000 });
    const { holder, waiting } = await heldWithLocalWaiters(
      here,
      'releasing',
      2,
    );
    await holder.release();
    const first = await waiting[0];
    // The caller asks in the same turn as the release reaches the backend:
    // before Redis can have answered it.
    const release = here.backend.release.bind(here.backend);
    let late: Promise<LockHandle> | undefined;
    const spy = vi
      .spyOn(here.backend, 'release')
      .mockImplementation((key, token) => {
        const released = release(key, token);
        late ??= here.locks.acquire('releasing', { waitTime: 5_000 });
        return released;
      });
    const { sent, stop } = await recordClientCommands();
    await sleep(50);
    await first.release();
    const second = await waiting[1];
    await sleep(50);
    stop();
    spy.mockRestore();
    // The release alone: no acquisition script queued the late caller.
    expect(scriptCalls(sent)).toEqual(['evalsha']);
    expect(await queueLength('releasing')).toBe(0);
    expect(waitingIn(here.backend)).toBe(1);
    await second.release();
    const third = await (late as Promise<LockHandle>);
    expect(await third.release()).toBe(true);
    await expectOnlyFenceLeft('releasing');
    expectNothingLeft(here.backend);
  });

  it('a caller waiting in memory gives up in time, and leaves nothing behind', async () => {
    const here = open();
    const { holder } = await heldWithLocalWaiters(here, 'behind-timeout', 0);
    const started = performance.now();
    const attempt = here.locks
      .acquire('behind-timeout', { waitTime: 200 })
      .catch((error: unknown) => error);
    await eventually(() => waitingIn(here.backend) === 1);
    expect(await queueLength('behind-timeout')).toBe(0);
    expect(await attempt).toBeInstanceOf(LockNotAcquiredError);
    expect(performance.now() - started).toBeLessThan(1_000);
    const controller = new AbortController();
    const aborted = here.locks
      .acquire('behind-timeout', { waitTime: 5_000, signal: controller.signal })
      .catch((error: unknown) => error);
    await eventually(() => waitingIn(here.backend) === 1);
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
    expect(await fixture.redis.get('lock:{behind-expiry}')).toBe(next.token);
    expect(await next.release()).toBe(true);
    expect(await holder.release()).toBe(false);
    expectNothingLeft(here.backend);
  });
});
