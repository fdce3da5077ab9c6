/**
 * Reentrancy at its edges: a call chain that outlives its lock, and a
 * nested hold released after its parent.
 */
import { LockNotAcquiredError, type LockHandle } from '@app/distributed-lock';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open } = fixture;

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
    expect(await fixture.redis.get('lock:{outlived}')).toBe(other.token);
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
