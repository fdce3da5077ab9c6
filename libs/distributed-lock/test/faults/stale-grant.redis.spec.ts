/**
 * A waiter paused past the lease of the lock handed to it (SIGSTOP standing
 * for a long GC or a suspended VM) must not run on that grant when it
 * resumes: another process holds the lock by then. A fenced resource, which
 * rejects a token lower than one it accepted and counts holders inside at
 * once, is the referee.
 */
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import type { OpenedLocks } from '../../../../test/support/lock-clients.js';
import {
  startLockHolder,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const fixture = useRedisFixture();
let resource: FencedResource;
let resourceUrl: string;
let here: OpenedLocks;
const holders: LockHolder[] = [];

beforeEach(async () => {
  resource = new FencedResource();
  resourceUrl = await resource.serve();
  here = fixture.open();
});

afterEach(async () => {
  await Promise.all(holders.splice(0).map((holder) => holder.stop()));
  await resource.close();
});

/** Holds `name` in this process for `holdMs`, as a fenced writer of the resource. */
async function holdFenced(name: string, holdMs: number): Promise<number> {
  const handle = await here.locks.acquire(name, { waitTime: 10_000 });
  const fence = await handle.fence();
  resource.enter('here', fence);
  expect(resource.write(fence, 'here')).toBe(true);
  await sleep(holdMs);
  resource.leave('here');
  await handle.release();
  return fence;
}

it('a waiter paused past its hand-off lease does not run on it: it waits for the holder that took the lock meanwhile', async () => {
  const name = 'stale';
  const first = await here.locks.acquire(name);
  const waiter = startLockHolder({
    url: fixture.server.url,
    key: name,
    name: 'paused',
    waitTime: 20_000,
    handoffLeaseMs: 500,
    holdMs: 100,
    fence: true,
    resourceUrl,
  });
  holders.push(waiter);
  await waiter.waitFor('acquiring');
  await eventually(
    async () => (await fixture.redis.llen(`lock:{${name}}:queue`)) === 1,
  );

  waiter.pause();
  // Handed to the paused waiter, for its 500 ms hand-off lease.
  await first.release();
  // It lapses, and this process takes the lock and holds it for a while.
  const taken = holdFenced(name, 1_000);
  await sleep(700);
  waiter.resume();
  const hereFence = await taken;

  const acquired = await waiter.waitFor('acquired', 10_000);
  // It ran only after this process released, with a higher token.
  expect(Number(acquired.fence)).toBeGreaterThan(hereFence);
  await waiter.waitFor('released', 10_000);
  expect(resource.overlaps).toBe(0);
  expect(resource.rejected).toBe(0);
  expect(resource.acceptedTokens).toEqual(
    resource.acceptedTokens.toSorted((a, b) => a - b),
  );
  expect(waiter.events.some((event) => event.event === 'lost')).toBe(false);
});
