import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import type { LockBackend } from '../backends/lock-backend.js';
import { LockService } from './lock.service.js';

/** A store that breaks the contract: it throws instead of rejecting. */
class ThrowingBackend extends MemoryLockBackend {
  failAcquire = false;
  failRelease = false;

  override acquire(...args: Parameters<LockBackend['acquire']>) {
    if (this.failAcquire) throw new Error('acquire exploded');
    return super.acquire(...args);
  }

  override release(...args: Parameters<LockBackend['release']>) {
    if (this.failRelease) throw new Error('release exploded');
    return super.release(...args);
  }
}

function serviceOn(backend: LockBackend): LockService {
  return new LockService({
    backend,
    keyPrefix: 'lock:',
    watchdogLeaseTime: 30_000,
    waitTime: 0,
    maxKeyLength: 512,
  });
}

describe('LockService errors are always rejections', () => {
  it('rejects, never throws, when the store throws on acquire or release', async () => {
    const backend = new ThrowingBackend();
    const locks = serviceOn(backend);
    try {
      backend.failAcquire = true;
      let acquiring: Promise<unknown> | undefined;
      expect(() => (acquiring = locks.acquire('k'))).not.toThrow();
      await expect(acquiring).rejects.toThrow('acquire exploded');

      backend.failAcquire = false;
      const handle = await locks.acquire('k');
      backend.failRelease = true;
      let releasing: Promise<unknown> | undefined;
      expect(() => (releasing = handle.release())).not.toThrow();
      await expect(releasing).rejects.toThrow('release exploded');
    } finally {
      await locks.close();
    }
  });

  it('rejects a fence option that is not true or false with a TypeError, locking nothing', async () => {
    const locks = serviceOn(new MemoryLockBackend());
    try {
      for (const fence of ['yes', 1, null]) {
        const options = { fence } as unknown as { fence: boolean };
        const acquiring = locks.acquire('k', options);
        await expect(acquiring).rejects.toBeInstanceOf(TypeError);
        await expect(acquiring).rejects.toThrow(
          `fence must be true or false, got ${String(fence)}`,
        );
      }
      expect(await locks.isLocked('k')).toBe(false);
      const fenced = await locks.acquire('k', { fence: true });
      expect(fenced.fencingToken).toBeGreaterThan(0);
      await fenced.release();
    } finally {
      await locks.close();
    }
  });

  it('rejects bad input instead of throwing', () => {
    const locks = serviceOn(new MemoryLockBackend());
    let acquiring: Promise<unknown> | undefined;
    expect(() => (acquiring = locks.acquire(''))).not.toThrow();
    return expect(acquiring).rejects.toThrow();
  });
});
