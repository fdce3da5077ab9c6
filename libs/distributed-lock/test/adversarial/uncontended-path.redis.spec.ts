/**
 * The uncontended path, a bare SET NX PX: a late SET, a newcomer passing the
 * queue, and keys found busy skipping it.
 */
import { LockBackendError } from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength, recordClientCommands } = fixture;

/** SET commands Redis ran so far, clients' and scripts' alike. */
async function setCalls(): Promise<number> {
  const stats = await fixture.redis.info('commandstats');
  return Number(/cmdstat_set:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe('the uncontended path (a bare SET NX PX)', () => {
  it('gives back a lock whose SET was answered after the acquisition timed out', async () => {
    const s = open({ commandTimeoutMs: 200 });
    const setsBefore = await setCalls();
    await fixture.redis.call('CLIENT', 'PAUSE', '500', 'WRITE');
    await expect(
      s.locks.acquire('late-set', { waitTime: 0 }),
    ).rejects.toBeInstanceOf(LockBackendError);
    await eventually(async () => (await setCalls()) > setsBefore);
    // Taken by the late SET, then freed at once rather than at its lease's end.
    await eventually(
      async () => (await fixture.redis.exists('lock:{late-set}')) === 0,
    );
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
    await fixture.redis.del('lock:{orphan}');
    const taken = await newcomer.locks.acquire('orphan', { waitTime: 0 });
    expect(await queueLength('orphan')).toBe(1);
    const released = performance.now();
    await taken.release();
    const next = await waiting;
    expect(performance.now() - released).toBeLessThan(300);
    expect(await fixture.redis.get('lock:{orphan}')).toBe(next.token);
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
