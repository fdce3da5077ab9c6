/**
 * Process sessions (issue 16): holding many locks costs one renewal command
 * per session TTL third, however many there are. One LockService holds
 * 10,000 locks with the default session TTL on a Redis of its own; Redis's
 * own command statistics over a quiet window are the measure.
 */
import { lockOptionDefaults } from '../../src/module/resolve-lock-options.js';
import type { LockHandle } from '../../src/lock-service/lock-handle.js';
import { sessionOf } from '../../src/session/session-token.js';
import { recordLost } from '../../../../test/support/lock-clients.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';

const lockCount = 10_000;
const batch = 500;
const windowMs = 6_000;
/** The target. */
const maxCommandsPerSecond = 2;
/** This test's own commands: resetting and reading the statistics. */
const measuring = new Set(['config|resetstat', 'info']);

const fixture = useRedisFixture();

/** Calls per command from `INFO commandstats` (`cmdstat_pexpire:calls=4,...`). */
function commandCalls(info: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    calls.set(match[1], Number(match[2]));
  return calls;
}

it(`${lockCount} locks held with the default session TTL: at most ${maxCommandsPerSecond} commands/s to Redis`, async () => {
  const ttlMs = lockOptionDefaults.sessionTtl;
  const s = fixture.open({ sessionTtl: ttlMs });
  const lost = recordLost(s);
  const handles: LockHandle[] = [];
  for (let from = 0; from < lockCount; from += batch) {
    const names = Array.from({ length: batch }, (_, i) => `many:${from + i}`);
    handles.push(
      ...(await Promise.all(names.map((name) => s.locks.acquire(name)))),
    );
  }
  const sessions = new Set(handles.map((handle) => sessionOf(handle.token)));
  expect(sessions.size).toBe(1);
  expect([...sessions][0]).toEqual(expect.any(String));

  await fixture.redis.config('RESETSTAT');
  const from = performance.now();
  await sleep(windowMs);
  const info = await fixture.redis.info('commandstats');
  const seconds = (performance.now() - from) / 1000;

  const calls = [...commandCalls(info)].filter(
    ([command]) => !measuring.has(command),
  );
  const total = calls.reduce((sum, [, n]) => sum + n, 0);
  const perSecond = total / seconds;
  const breakdown = calls
    .map(([command, n]) => `${command.toUpperCase()} ${n} calls`)
    .join(', ');
  console.log(
    `[sessions] ${lockCount} locks held: ${perSecond.toFixed(1)} commands/s to Redis ` +
      `(${breakdown || 'none'} in ${seconds.toFixed(1)} s, session TTL ${ttlMs} ms)`,
  );
  expect(perSecond).toBeLessThanOrEqual(maxCommandsPerSecond);
  // The window saw the session renewed (a third of the TTL apart), so the
  // count is of a live holder, not of a silent one.
  const renewals = Math.floor((windowMs * 3) / ttlMs);
  expect(calls).toEqual([['pexpire', expect.any(Number)]]);
  expect(calls[0][1]).toBeGreaterThanOrEqual(renewals - 1);
  expect(calls[0][1]).toBeLessThanOrEqual(renewals + 1);

  expect(lost).toEqual([]);
  expect(handles.some((handle) => handle.lost)).toBe(false);
  const sample = [0, lockCount / 2, lockCount - 1].map(
    (i) => `lock:{many:${i}}`,
  );
  expect(await fixture.redis.mget(sample)).toEqual(
    [0, lockCount / 2, lockCount - 1].map((i) => handles[i].token),
  );
});
