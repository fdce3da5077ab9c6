/**
 * Process sessions (issue 16): a holder frozen with SIGSTOP (a long GC, a
 * suspended VM) stops renewing its session, and its lock goes to a waiter
 * elsewhere. The holder must be told first: its hold's local deadline (the
 * send time of the last confirmed renewal + TTL − drift, on its own clock)
 * passes before the waiter is granted, so that once it runs again it sees the
 * lock lost before it can act on it. A fenced resource is the referee: the
 * holder, resumed, writes with its old token, and the write is rejected.
 */
import { lockOptionDefaults } from '../../src/module/resolve-lock-options.js';
import { sessionOf } from '../../src/session/session-token.js';
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import { eventually } from '../../../../test/support/lock-fixtures.js';
import {
  startLockHolder,
  type HolderEvent,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const ttlMs = 1_000;
const key = 'paused';

const fixture = useRedisFixture();
let resource: FencedResource;
let holder: LockHolder | undefined;

beforeEach(() => {
  resource = new FencedResource();
});

afterEach(async () => {
  await holder?.kill();
  holder = undefined;
  await resource.close();
});

const eventsNamed = (name: string): HolderEvent[] =>
  holder!.events.filter((event) => event.event === name);

it('a SIGSTOPped holder is told lost (session-expired) before the waiter elsewhere is granted; resumed, its stale write is rejected', async () => {
  holder = startLockHolder({
    url: fixture.server.url,
    key,
    name: 'paused',
    sessionTtl: ttlMs,
    fence: true,
    resourceUrl: await resource.serve(),
    writeEveryMs: 50,
    reportExpiry: true,
  });
  const acquired = await holder.waitFor('acquired', 20_000);
  const session = sessionOf(String(acquired.token));
  expect(session).toEqual(expect.any(String));
  expect((await holder.waitFor('wrote')).accepted).toBe(true);

  // The waiter's own session has the default TTL: only the holder's is under test.
  const waiter = fixture.open({ sessionTtl: lockOptionDefaults.sessionTtl });
  const granting = waiter.locks
    .acquire(key, { waitTime: 10_000 })
    .then((handle) => ({ handle, at: Date.now() }));
  await eventually(
    async () => (await fixture.redis.llen(`lock:{${key}}:queue`)) === 1,
  );

  // Frozen just after it reported a renewal confirmed: the next is a third
  // of the TTL away, so its last reported deadline is the one it froze with.
  const expiriesSeen = eventsNamed('expiry').length;
  await eventually(() => eventsNamed('expiry').length > expiriesSeen, 3_000);
  holder.pause();
  const pausedAt = Date.now();
  const deadline = Number(eventsNamed('expiry').at(-1)!.expiresAt);
  const pttlSentAt = Date.now();
  const recordEnd =
    pttlSentAt + (await fixture.redis.pttl(`lock:session:{${session}}`));
  expect(
    eventsNamed('lost'),
    'the holder lost its lock before the pause (its session lapsed: a starved machine?)',
  ).toEqual([]);

  const grant = await granting;
  const fence = await grant.handle.fence();
  expect(fence).toBeGreaterThan(Number(acquired.fence));
  expect(resource.write(fence, 'waiter')).toBe(true);
  const wroteAt = Date.now();

  holder.resume();
  const lost = await holder.waitFor('lost', 5_000);
  // A write sent after the resume, with the old token.
  await eventually(
    () => eventsNamed('wrote').some((e) => Number(e.sentAt) >= wroteAt),
    5_000,
  );

  const staleWrites = eventsNamed('wrote').filter(
    (e) => Number(e.sentAt) >= wroteAt,
  );
  console.log(
    `[sessions] SIGSTOPped holder (TTL ${ttlMs} ms): its hold's deadline passed ${Math.round(grant.at - deadline)} ms ` +
      `before the waiter was granted (${grant.at - pausedAt} ms after the pause; the session record outlived the ` +
      `deadline by ${Math.round(recordEnd - deadline)} ms); on SIGCONT it reported lost (${String(lost.reason)}), and ` +
      `${staleWrites.filter((e) => e.accepted === false).length} of its ${staleWrites.length} writes with its old ` +
      `fencing token were rejected`,
  );
  expect(lost).toMatchObject({
    key,
    reason: 'session-expired',
    fence: acquired.fence,
  });
  // Told first: the record outlives the holder's deadline, and the waiter
  // can only be granted once the record is gone.
  expect(deadline).toBeLessThanOrEqual(recordEnd);
  expect(deadline).toBeLessThanOrEqual(grant.at);
  expect(grant.at - pausedAt).toBeLessThanOrEqual(ttlMs + 1_000);

  // Resumed, the holder knew it was lost before sending anything, and the
  // resource accepted nothing more from it.
  for (const write of staleWrites) {
    expect(write).toMatchObject({ held: false, accepted: false });
    expect(Number(write.sentAt)).toBeGreaterThanOrEqual(Number(lost.at));
  }
  const fromHolderAfterGrant = resource.writes.filter(
    (write) => write.writer === 'paused' && write.at >= wroteAt,
  );
  expect(fromHolderAfterGrant.length).toBeGreaterThan(0);
  expect(fromHolderAfterGrant.filter((write) => write.accepted)).toEqual([]);
  expect(resource.highest).toBe(fence);

  expect(await holder.stop()).toBe(0);
  expect((await holder.waitFor('released')).result).toBe(false);
  expect(await grant.handle.release()).toBe(true);
});
