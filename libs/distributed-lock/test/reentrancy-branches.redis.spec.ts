/**
 * Reentrancy follows the async call chain (AsyncLocalStorage), so concurrent
 * branches of one chain, such as a `Promise.all` inside a locked method, are
 * the same holder: they share the hold and run at once. This pins that
 * choice down; a caller that wants the branches one at a time awaits them in
 * turn.
 */
import { sleep } from '../../../test/support/lock-fixtures.js';
import { useRedisFixture } from '../../../test/support/redis-fixture.js';

const fixture = useRedisFixture();

it('concurrent branches of one call chain share its hold: they run at once, and the key is freed after the last', async () => {
  const s = fixture.open();
  const inside = new Set<string>();
  let mostInside = 0;
  const branch = (name: string, holdMs: number) =>
    s.locks.using(
      'branches',
      async (lock) => {
        expect(lock.reentrant).toBe(true);
        inside.add(name);
        mostInside = Math.max(mostInside, inside.size);
        await sleep(holdMs);
        inside.delete(name);
      },
      // Joining never waits: a branch that had to wait would fail at once.
      { waitTime: 0 },
    );
  let outerToken = '';
  const outer = s.locks.using('branches', async (lock) => {
    outerToken = lock.token;
    await Promise.all([branch('a', 100), branch('b', 150)]);
    expect(await fixture.redis.get('lock:{branches}')).toBe(lock.token);
  });
  await outer;
  expect(mostInside).toBe(2);
  expect(outerToken).not.toBe('');
  expect(await fixture.redis.exists('lock:{branches}')).toBe(0);
});

it('another caller is kept out while the branches run', async () => {
  const s = fixture.open();
  const other = fixture.open();
  await s.locks.using('branches-outside', async () => {
    await Promise.all([
      s.locks.using('branches-outside', () => sleep(50)),
      s.locks.using('branches-outside', async () => {
        expect(await other.locks.tryAcquire('branches-outside')).toBeNull();
      }),
    ]);
  });
  const next = await other.locks.acquire('branches-outside');
  await next.release();
});
