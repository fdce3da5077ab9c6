import { MemoryLockBackend } from '../backends/memory/memory-lock-backend.js';
import { monotonicNow } from '../lease/lease-clock.js';
import { HeldKey } from './held-key.js';
import type { LockLostReason } from './lock-events.js';

let backend: MemoryLockBackend;

beforeEach(async () => {
  backend = new MemoryLockBackend();
  await backend.acquire({ key: 'k', token: 't', leaseMs: 100, waitMs: 0 });
});

afterEach(async () => {
  await backend.close();
});

/** A hold of `k` with an explicit 100 ms lease, granted `waitedMs` after the call. */
function explicitHold(waitedMs: number): {
  held: HeldKey;
  lost: LockLostReason[];
} {
  const lost: LockLostReason[] = [];
  const held = new HeldKey({
    name: 'k',
    scopeKey: 'service|k',
    storeKey: 'k',
    token: 't',
    policy: { leaseMs: 100, watchdog: false },
    // The lease counts from the call: the wait is part of it.
    grantedLeaseMs: waitedMs + 100,
    sentAt: monotonicNow() - waitedMs,
    backend,
    onLost: (_held, reason) => lost.push(reason),
  });
  return { held, lost };
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('HeldKey', () => {
  it('takes the drift allowance off the lease, not off the wait before the grant', async () => {
    const { held, lost } = explicitHold(9_900);
    // 1% of 100 ms plus 2 ms, not 1% of the 10 s since the call.
    expect(held.expiresAt - Date.now()).toBeGreaterThan(90);
    await sleep(50);
    expect(lost).toEqual([]);
    await sleep(100);
    expect(lost).toEqual(['lease-expired']);
    held.stop();
  });

  it('reads as lost at once after its deadline passed in a blocked event loop', () => {
    const { held, lost } = explicitHold(0);
    const blockedUntil = monotonicNow() + 150;
    while (monotonicNow() < blockedUntil) {
      // A long synchronous stretch: no timer can fire.
    }
    expect(held.lost).toBe(true);
    expect(held.signal.aborted).toBe(true);
    expect(lost).toEqual(['lease-expired']);
    held.stop();
  });
});
