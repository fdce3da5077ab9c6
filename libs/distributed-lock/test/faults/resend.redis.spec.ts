/**
 * Commands re-sent after a reconnect. ioredis re-sends every command that was
 * in flight when its connection dropped, so a script whose effect reached
 * Redis but whose answer was lost runs twice. The proxy forwards one command,
 * then cuts the connection before its answer reaches the client.
 */
import {
  commandOn,
  recordLost,
  scriptCall,
  waitingIn,
} from '../../../../test/support/lock-clients.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const fixture = useRedisFixture({ proxy: true });

/** A lock service whose connection goes through the proxy. */
const throughProxy = () =>
  fixture.open({ url: fixture.proxy.url, commandTimeoutMs: 5_000 });
const direct = () => fixture.open();

describe('an acquisition whose answer was lost', () => {
  it('tryAcquire gets the lock its first SET took, and its release frees it', async () => {
    const s = throughProxy();
    const cut = fixture.proxy.cutAfterRequest(commandOn('set', 'lock:{try}'));
    const handle = await s.locks.tryAcquire('try');
    await cut;
    expect(handle).not.toBeNull();
    expect(await fixture.redis.get('lock:{try}')).toBe(handle?.token);
    expect(await handle?.release()).toBe(true);
    expect(await fixture.redis.exists('lock:{try}')).toBe(0);
  });

  it('a waiting acquire gets that lock at once instead of waiting for itself', async () => {
    const s = throughProxy();
    const cut = fixture.proxy.cutAfterRequest(commandOn('set', 'lock:{wait}'));
    const started = Date.now();
    const handle = await s.locks.acquire('wait', { waitTime: 10_000 });
    await cut;
    // The hand-off lease (3 s) is what waiting for itself would have cost.
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await fixture.redis.get('lock:{wait}')).toBe(handle.token);
    expect(await fixture.redis.llen('lock:{wait}:queue')).toBe(0);
    await handle.release();
  });

  it('the holder gets a fencing token above the previous holder, and the next holder one above it', async () => {
    const before = direct();
    const previous = await before.locks.acquire('fenced');
    const previousFence = await previous.fence();
    await previous.release();

    const s = throughProxy();
    const cut = fixture.proxy.cutAfterRequest(
      commandOn('set', 'lock:{fenced}'),
    );
    const handle = await s.locks.acquire('fenced', { waitTime: 10_000 });
    await cut;
    const fence = await handle.fence();
    expect(fence).toBeGreaterThan(previousFence);
    await handle.release();

    const next = await before.locks.acquire('fenced');
    expect(await next.fence()).toBeGreaterThan(fence);
    await next.release();
  });

  it('an acquisition with fence: true gets the lock its first run took, with a token above the one that run issued', async () => {
    const s = throughProxy();
    const cut = fixture.proxy.cutAfterRequest(
      scriptCall('lockAcquireFenced', 'lock:{fenced-grant}'),
    );
    const started = Date.now();
    const handle = await s.locks.acquire('fenced-grant', {
      waitTime: 10_000,
      fence: true,
    });
    await cut;
    // Not a wait for itself: the hand-off lease (3 s) would show.
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await fixture.redis.get('lock:{fenced-grant}')).toBe(handle.token);
    // The lost answer's token was issued (the counter holds the last one):
    // the holder's is a later one, never the same twice.
    expect(handle.fencingToken).toBe(
      Number(await fixture.redis.get('lock:{fenced-grant}:fence')),
    );
    await handle.release();
    const next = await direct().locks.acquire('fenced-grant', { fence: true });
    expect(next.fencingToken).toBeGreaterThan(handle.fencingToken ?? Infinity);
    await next.release();
  });

  it('a queueing script run twice leaves the waiter queued once', async () => {
    const rival = direct();
    const blocker = await rival.locks.acquire('queued');
    const s = throughProxy();
    const cut = fixture.proxy.cutAfterRequest(
      scriptCall('lockAcquire', 'lock:{queued}'),
    );
    const waiting = s.locks.acquire('queued', { waitTime: 10_000 });
    await cut;
    // Answered after the re-send: the entry the client knows is the only one.
    await expect.poll(() => waitingIn(s.backend), { timeout: 5_000 }).toBe(1);
    expect(await fixture.redis.llen('lock:{queued}:queue')).toBe(1);
    await blocker.release();
    const handle = await waiting;
    expect(await fixture.redis.get('lock:{queued}')).toBe(handle.token);
    await handle.release();
    expect(
      await fixture.redis.exists('lock:{queued}', 'lock:{queued}:queue'),
    ).toBe(0);
  });
});

describe('a fencing token request whose answer was lost', () => {
  it('never answers a token at or below one answered before', async () => {
    const other = direct();
    const first = await other.locks.acquire('refence');
    const firstFence = await first.fence();
    await first.release();

    const s = throughProxy();
    const handle = await s.locks.acquire('refence');
    const cut = fixture.proxy.cutAfterRequest(
      scriptCall('lockFence', 'lock:{refence}'),
    );
    const fence = await handle.fence();
    await cut;
    expect(fence).toBeGreaterThan(firstFence);
    await handle.release();
    const next = await other.locks.acquire('refence');
    expect(await next.fence()).toBeGreaterThan(fence);
    await next.release();
  });
});

describe('a release whose answer was lost', () => {
  it.each([
    ['nobody waits', false],
    ['a waiter in another process', true],
  ] as const)(
    'counts as released when %s: no lost event, and the key is free or handed on',
    async (_case, contended) => {
      const s = throughProxy();
      const lost = recordLost(s);
      const name = contended ? 'release-queued' : 'release-free';
      const handle = await s.locks.acquire(name);
      const other = direct();
      const waiting = contended
        ? other.locks.acquire(name, { waitTime: 10_000 })
        : undefined;
      if (waiting)
        await expect
          .poll(() => fixture.redis.llen(`lock:{${name}}:queue`))
          .toBe(1);
      const cut = fixture.proxy.cutAfterRequest(
        scriptCall(
          contended ? 'lockRelease' : 'lockReleaseUnqueued',
          `lock:{${name}}`,
        ),
      );
      const started = Date.now();
      expect(await handle.release()).toBe(true);
      await cut;
      expect(lost).toEqual([]);
      if (waiting) {
        const next = await waiting;
        expect(Date.now() - started).toBeLessThan(1_500);
        expect(await fixture.redis.get(`lock:{${name}}`)).toBe(next.token);
        await next.release();
      }
      expect(await fixture.redis.exists(`lock:{${name}}`)).toBe(0);
    },
  );

  it('a release that handed the lock to a waiter of the same process: the waiter still gets it', async () => {
    // No passes in memory: the release script itself hands the lock over,
    // and its answer, lost here, was the only message to the waiter.
    const s = fixture.open({
      url: fixture.proxy.url,
      commandTimeoutMs: 5_000,
      localHandoffs: 0,
      handoffLeaseMs: 500,
    });
    const lost = recordLost(s);
    const holder = await s.locks.acquire('release-local');
    const waiting = s.locks.acquire('release-local', { waitTime: 10_000 });
    await expect
      .poll(() => fixture.redis.llen('lock:{release-local}:queue'))
      .toBe(1);
    const cut = fixture.proxy.cutAfterRequest(
      scriptCall('lockRelease', 'lock:{release-local}'),
    );
    expect(await holder.release()).toBe(true);
    await cut;
    // Found at the waiter's next check, within the hand-off lease.
    const next = await waiting;
    expect(await fixture.redis.get('lock:{release-local}')).toBe(next.token);
    expect(lost).toEqual([]);
    expect(await next.release()).toBe(true);
  });
});
