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

/** A hold of `k` with an explicit lease (default 100 ms), granted `waitedMs` after the call. */
function explicitHold(
  waitedMs: number,
  leaseMs = 100,
): {
  held: HeldKey;
  lost: LockLostReason[];
} {
  const lost: LockLostReason[] = [];
  const held = new HeldKey({
    name: 'k',
    scopeKey: 'service|k',
    storeKey: 'k',
    token: 't',
    policy: { leaseMs, watchdog: false },
    // The lease counts from the call: the wait is part of it.
    grantedLeaseMs: waitedMs + leaseMs,
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
    // Measured from before the hold, so a slow machine's pauses after it do
    // not count against the lease.
    const before = Date.now();
    const { held, lost } = explicitHold(99_000, 1_000);
    // 1% of 1 s plus 2 ms (988 ms left), not 1% of the 100 s since the call
    // (lost at once).
    expect(held.expiresAt - before).toBeGreaterThan(980);
    expect(held.expiresAt - before).toBeLessThanOrEqual(1_000);
    await sleep(400);
    expect(lost).toEqual([]);
    await sleep(700);
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
