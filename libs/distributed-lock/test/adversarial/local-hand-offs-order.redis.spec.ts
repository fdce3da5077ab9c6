/**
 * Local hand-offs (lock cohorting): the order waiters are served in when a
 * release may pass the lock to a waiter of its own process ahead of the
 * oldest one (in another process), within localHandoffs and its window.
 */
import { expectNothingLeft } from '../../../../test/support/backend-internals.js';
import type { OpenedLocks } from '../../../../test/support/lock-clients.js';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength, expectOnlyFenceLeft } = fixture;

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
    from: OpenedLocks,
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
    const ttl = await fixture.redis.pttl('lock:{cohort-ttl}:queue');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(4_000 + 1_000);
    expect(
      await fixture.redis.pttl('lock:{cohort-ttl}:bypass'),
    ).toBeGreaterThan(0);
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

  it('counts passes in memory toward localHandoffs: a remote waiter is served after them', async () => {
    const here = open({ localHandoffs: 2, localHandoffWindowMs: 60_000 });
    const there = open({ localHandoffs: 2, localHandoffWindowMs: 60_000 });
    // A third process's: its release serves the queue's head.
    const blocker = await open().locks.acquire('mixed');
    const order: string[] = [];
    const track = (name: string, from: OpenedLocks) =>
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
