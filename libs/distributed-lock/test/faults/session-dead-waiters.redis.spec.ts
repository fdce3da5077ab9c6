/**
 * A killed process leaves its queued waiters behind in Redis. Once its
 * session lapses they are as dead as its hold: the lock must go to a live
 * waiter within the TTL, not to each dead waiter in turn for a hand-off
 * lease.
 */
import type { ChildProcess } from 'node:child_process';
import { eventually } from '../../../../test/support/lock-fixtures.js';
import { spawnTs } from '../../../../test/support/processes.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const fixture = useRedisFixture();
const sessionTtl = 1_000;
const deadWaiters = 4;
let child: ChildProcess | undefined;

afterEach(() => child?.kill('SIGKILL'));

it('serves a live waiter within the session TTL, past the waiters a killed process left queued', async () => {
  child = spawnTs(
    'libs/distributed-lock/test/workers/doomed-holder.ts',
    [fixture.server.url, 'crowded', '30000', String(sessionTtl)],
    { QUEUED: String(deadWaiters) },
  );
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await eventually(() => out.includes('queued'), 20_000);

  const { locks } = fixture.open({ sessionTtl: 5_000, handoffLeaseMs: 3_000 });
  const granted = locks.acquire('crowded', { waitTime: 15_000 });
  await eventually(
    async () =>
      (await fixture.redis.llen('lock:{crowded}:queue')) === deadWaiters + 1,
  );
  child.kill('SIGKILL');
  const killedAt = performance.now();
  const handle = await granted;
  const afterKill = Math.round(performance.now() - killedAt);
  console.log(
    `[sessions] killed holder with ${deadWaiters} of its own waiters queued ahead: the live waiter got the lock ${afterKill} ms after the kill (TTL ${sessionTtl} ms, hand-off lease 3000 ms)`,
  );
  expect(afterKill).toBeLessThan(sessionTtl + 1_000);
  expect(await fixture.redis.llen('lock:{crowded}:queue')).toBe(0);
  await handle.release();
});
