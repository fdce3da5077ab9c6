import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import { monotonicNow } from '../lease/lease-clock.js';
import { HeldKey } from './held-key.js';
import type { LockLostReason } from './lock-events.js';

const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('HeldKey', () => {
  it('takes the drift allowance off the lease, not off the wait before the grant', async () => {
    const backend = new MemoryLockBackend();
    const grant = await backend.acquire({
      key: 'k',
      token: 't',
      leaseMs: 100,
      waitMs: 0,
    });
    expect(grant.acquired).toBe(true);
    const lost: LockLostReason[] = [];
    // Granted after a 9.9 s wait: the lease (100 ms) counts from the call.
    const held = new HeldKey({
      name: 'k',
      scopeKey: 'service|k',
      storeKey: 'k',
      token: 't',
      policy: { leaseMs: 100, watchdog: false },
      grantedLeaseMs: 9_900 + 100,
      sentAt: monotonicNow() - 9_900,
      backend,
      onLost: (_held, reason) => lost.push(reason),
    });
    // 1% of 100 ms plus 2 ms, not 1% of the 10 s since the call.
    expect(held.expiresAt - Date.now()).toBeGreaterThan(90);
    await sleep(50);
    expect(lost).toEqual([]);
    await sleep(100);
    expect(lost).toEqual(['lease-expired']);
    held.stop();
    await backend.close();
  });

  it('reads as lost at once after its deadline passed in a blocked event loop', async () => {
    const backend = new MemoryLockBackend();
    await backend.acquire({ key: 'k', token: 't', leaseMs: 100, waitMs: 0 });
    const lost: LockLostReason[] = [];
    const held = new HeldKey({
      name: 'k',
      scopeKey: 'service|k',
      storeKey: 'k',
      token: 't',
      policy: { leaseMs: 100, watchdog: false },
      grantedLeaseMs: 100,
      sentAt: monotonicNow(),
      backend,
      onLost: (_held, reason) => lost.push(reason),
    });
    const blockedUntil = monotonicNow() + 150;
    while (monotonicNow() < blockedUntil) {
      // A long synchronous stretch: no timer can fire.
    }
    expect(held.lost).toBe(true);
    expect(held.signal.aborted).toBe(true);
    expect(lost).toEqual(['lease-expired']);
    held.stop();
    await backend.close();
  });
});
