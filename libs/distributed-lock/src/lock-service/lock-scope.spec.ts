import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import { currentLock, lockScope } from './lock-scope.js';
import { LockService } from './lock.service.js';

/** Node 20's field for whether the storage's async hook is on. */
const enabled = () => (lockScope as unknown as { enabled: boolean }).enabled;
const keptByHooks = typeof Reflect.get(lockScope, '_propagate') === 'function';

let locks: LockService;

beforeEach(() => {
  locks = new LockService({
    backend: new MemoryLockBackend(),
    keyPrefix: 'lock:',
    watchdogLeaseTime: 30_000,
    waitTime: 0,
    maxKeyLength: 512,
  });
});

afterEach(() => locks.close());

describe('the lock scope', () => {
  it.runIf(keptByHooks)(
    'turns its async hook off once the last lock that ran code in scope is released, and on for the next',
    async () => {
      await locks.using('a', async () => {
        await sleep(1);
        expect(enabled()).toBe(true);
      });
      expect(enabled()).toBe(false);

      const handle = await locks.acquire('b');
      await handle.run(() => sleep(1));
      expect(enabled()).toBe(true);
      await handle.release();
      expect(enabled()).toBe(false);
    },
  );

  it('still reaches every async step of a held lock after another lock left its scope', async () => {
    const first = await locks.acquire('first');
    const second = await locks.acquire('second');
    let releaseFirst!: () => void;
    const firstDone = new Promise<void>((resolve) => (releaseFirst = resolve));
    const seen: (string | undefined)[] = [];

    const inFirst = first.run(() => firstDone);
    const inSecond = second.run(async () => {
      seen.push(currentLock()?.keys[0]);
      // The first lock's release closes its scope while this one runs.
      releaseFirst();
      await inFirst;
      await first.release();
      await sleep(5);
      seen.push(currentLock()?.keys[0]);
      await new Promise((resolve) => setImmediate(resolve));
      seen.push(currentLock()?.keys[0]);
      // Reentrant: joins the hold instead of waiting for itself.
      const nested = await locks.acquire('second', { waitTime: 0 });
      seen.push(String(nested.reentrant));
      await nested.release();
    });
    await inSecond;
    await second.release();

    expect(seen).toEqual(['second', 'second', 'second', 'true']);
    expect(currentLock()).toBeUndefined();
  });

  it('gives a scope opened again after every lock was released its lock', async () => {
    await locks.using('once', () => sleep(1));
    await locks.using('again', async () => {
      await sleep(1);
      expect(currentLock()?.keys).toEqual(['again']);
    });
  });
});
