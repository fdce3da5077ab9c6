import { Redis } from 'ioredis';

import { FencedResource } from './fenced-resource.js';
import { eventually, sleep } from './lock-fixtures.js';
import {
  startLockHolder,
  type LockHolder,
  type LockHolderOptions,
} from './lock-holder.js';
import { getFreePort } from './ports.js';
import { isProcessGone, isProcessStopped } from './process-state.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';

describe('lock-holder test helper', () => {
  let server: RedisServerHandle;
  let redis: Redis;
  const holders: LockHolder[] = [];

  function start(options: Omit<LockHolderOptions, 'url'>): LockHolder {
    const holder = startLockHolder({ url: server.url, ...options });
    holders.push(holder);
    return holder;
  }

  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url);
  });

  afterEach(async () => {
    await Promise.all(holders.splice(0).map((holder) => holder.kill()));
  });

  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it('a waiter gets the lock once the holder is SIGKILLed and its lease ends; stop releases it', async () => {
    // Both start at once (process start-up is the slow part); whichever gets
    // the lock first is the one killed. The watchdog keeps it while alive.
    const options = {
      key: 'crash',
      watchdogLeaseTime: 500,
      waitTime: 10_000,
      handoffLeaseMs: 200,
    };
    const pair = [start(options), start(options)];
    const first = await Promise.race(
      pair.map(async (holder) => {
        await holder.waitFor('acquired');
        return holder;
      }),
    );
    const second = pair.find((holder) => holder !== first)!;
    const held = await first.waitFor('acquired');
    expect(held.token).toBeTypeOf('string');
    expect(held.at).toBeLessThanOrEqual(Date.now());
    expect(await redis.get('lock:{crash}')).toBe(held.token);
    await second.waitFor('acquiring');
    await sleep(700); // longer than a lease: the live holder keeps it
    expect(second.events.map((e) => e.event)).not.toContain('acquired');

    const killedAt = Date.now();
    await first.kill();
    expect(isProcessGone(first.pid)).toBe(true);
    const acquired = await second.waitFor('acquired');
    expect(acquired.at! - killedAt).toBeLessThan(500 + 200 + 800);
    expect(await redis.get('lock:{crash}')).toBe(acquired.token);

    expect(await second.stop()).toBe(0);
    expect(second.events.map((e) => e.event)).toEqual([
      'ready',
      'acquiring',
      'acquired',
      'released',
      'done',
    ]);
    expect((await second.waitFor('released')).result).toBe(true);
    expect(await redis.exists('lock:{crash}')).toBe(0);
  });

  it('fences and reports to a resource; pause freezes it past its lease, resume lets it find the lock lost', async () => {
    const resource = new FencedResource();
    const resourceUrl = await resource.serve();
    try {
      const holder = start({
        key: 'paused',
        watchdogLeaseTime: 400,
        fence: true,
        resourceUrl,
      });
      const acquired = await holder.waitFor('acquired');
      expect(acquired.fence).toBeTypeOf('number');
      expect((await holder.waitFor('wrote')).accepted).toBe(true);
      expect(resource.acceptedTokens).toEqual([acquired.fence]);
      expect(resource.inside).toEqual([`holder-${holder.pid}`]);

      holder.pause();
      expect(isProcessStopped(holder.pid)).toBe(true);
      // Its watchdog is frozen too: the lease runs out.
      await eventually(async () => (await redis.exists('lock:{paused}')) === 0);
      holder.resume();
      expect(isProcessStopped(holder.pid)).toBe(false);
      // Taken over, or renewals failed: the library's call, not the helper's.
      expect((await holder.waitFor('lost')).reason).toMatch(
        /taken-over|renewal-failed/,
      );

      holder.pause();
      expect(await holder.stop()).toBe(0); // continued, then stopped
      expect(holder.events.map((e) => e.event)).toEqual([
        'ready',
        'acquiring',
        'acquired',
        'entered',
        'wrote',
        'lost',
        'released',
        'done',
      ]);
      expect((await holder.waitFor('released')).result).toBe(false);
      expect(resource.inside).toEqual([]);
    } finally {
      await resource.close();
    }
  });

  it('holds `count` locks bound to its session, reports its deadline as renewals move it, and releases them all', async () => {
    const holder = start({
      key: 'several',
      count: 3,
      sessionTtl: 600,
      reportExpiry: true,
    });
    const acquired = await holder.waitFor('acquired');
    expect(acquired.count).toBe(3);
    const session = String(acquired.token).split('.')[0];
    const stored = await redis.mget(
      ['several:0', 'several:1', 'several:2'].map((k) => `lock:{${k}}`),
    );
    expect(stored.map((token) => token?.split('.')[0])).toEqual([
      session,
      session,
      session,
    ]);
    expect(await redis.pttl(`lock:session:{${session}}`)).toBeGreaterThan(0);
    // Renewals every 200 ms move the deadline on.
    await eventually(
      () => holder.events.filter((e) => e.event === 'expiry').length >= 3,
    );
    const deadlines = holder.events
      .filter((e) => e.event === 'expiry')
      .map((e) => Number(e.expiresAt));
    expect(deadlines).toEqual(deadlines.toSorted((a, b) => a - b));
    expect(deadlines[0]).toBeLessThanOrEqual(Number(acquired.at) + 600);

    expect(await holder.stop()).toBe(0);
    expect((await holder.waitFor('released')).result).toBe(true);
    expect(await redis.exists('lock:{several:0}', 'lock:{several:2}')).toBe(0);
  });

  it("counts a wait from the holder's ready, not from while it was starting", async () => {
    const startedAt = Date.now();
    const holder = start({ key: 'late-start' });
    // A start-up slower than the wait, as on a busy machine.
    holder.pause();
    const acquired = holder.waitFor('acquired', 1_000);
    await sleep(1_500);
    holder.resume();
    expect((await acquired).token).toBeTypeOf('string');
    const ready = await holder.waitFor('ready');
    expect(ready.at! - startedAt).toBeGreaterThanOrEqual(1_500);
  });

  it('waitFor rejects with the output when the holder exits first', async () => {
    const port = await getFreePort(); // nothing listens there
    const holder = startLockHolder({
      url: `redis://127.0.0.1:${port}`,
      key: 'nowhere',
    });
    holders.push(holder);
    await expect(holder.waitFor('acquired')).rejects.toThrow(
      /exited before "acquired" \(exit code 1\)[\s\S]*"error"/,
    );
    expect((await holder.waitFor('error')).message).toBeTypeOf('string');
    await expect(holder.waitFor('ready')).rejects.toThrow(/exit code 1/);
    await expect(holder.stop()).resolves.toBe(1);
  });
});
