/**
 * `freeOnDisconnect`: a killed holder's locks go as soon as Redis sees its
 * connection close, well under a second, not when its session's TTL runs out;
 * a holder whose own connection drops is told lost before anyone is granted
 * its lock; a frozen holder, whose connection stays open, keeps its locks
 * for the TTL.
 */
import type { ChildProcess } from 'node:child_process';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { startLockHolder } from '../../../../test/support/lock-holder.js';
import { setProcessStopped } from '../../../../test/support/process-state.js';
import { spawnTs } from '../../../../test/support/processes.js';
import { useRedisFixture } from '../../../../test/support/redis-fixture.js';
import type { LockLostEvent } from '../../src/lock-service/lock-events.js';

const fixture = useRedisFixture({ proxy: true });
const sessionTtl = 5_000;
/** For the cases that wait for a session to lapse: shorter, so CI waits less. */
const shortTtl = 2_000;
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A child process holding `key` under a session, until it is killed. */
async function startHolder(
  key: string,
  freeOnDisconnect: boolean,
  ttl = sessionTtl,
) {
  const child = spawnTs('libs/distributed-lock/test/workers/doomed-holder.ts', [
    fixture.server.url,
    key,
    '30000',
    String(ttl),
    ...(freeOnDisconnect ? ['free-on-disconnect'] : []),
  ]);
  children.push(child);
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await eventually(() => out.includes('acquired'), 20_000);
  return { child, fence: Number(/acquired (\d+)/.exec(out)?.[1]) };
}

/** Waits for `key` in this process; resolves when granted, with the time and fencing token. */
async function waitFor(key: string) {
  const { locks } = fixture.open({ sessionTtl, freeOnDisconnect: true });
  const handle = await locks.acquire(key, { waitTime: 15_000 });
  const grantedAt = performance.now();
  const fence = await handle.fence();
  await handle.release();
  return { grantedAt, fence };
}

describe('freeOnDisconnect', () => {
  it('frees a SIGKILLed holder’s lock for a waiter well under a second after the kill', async () => {
    const holder = await startHolder('killed', true);
    const waiting = waitFor('killed');
    await sleep(300);
    holder.child.kill('SIGKILL');
    const killedAt = performance.now();
    const { grantedAt, fence } = await waiting;
    const afterKill = Math.round(grantedAt - killedAt);
    console.log(
      `[sessions] freeOnDisconnect: a SIGKILLed holder's lock was granted to a waiter ${afterKill} ms after the kill (session TTL ${sessionTtl} ms)`,
    );
    expect(afterKill).toBeLessThan(1_000);
    expect(fence).toBeGreaterThan(holder.fence);
  });

  it('frees all 1,000 locks of a SIGKILLed holder for their waiters well before the session TTL', async () => {
    const count = 1_000;
    const holder = startLockHolder({
      url: fixture.server.url,
      key: 'fast',
      count,
      sessionTtl,
      freeOnDisconnect: true,
    });
    await holder.waitFor('acquired', 30_000);
    const keys = Array.from({ length: count }, (_, i) => `fast:${i}`);
    const { locks } = fixture.open({ sessionTtl, freeOnDisconnect: true });
    const granting = keys.map((key) =>
      locks.acquire(key, { waitTime: 15_000 }).then((handle) => ({
        handle,
        at: performance.now(),
      })),
    );
    await eventually(async () => {
      const pipeline = fixture.redis.pipeline();
      for (const key of keys) pipeline.llen(`lock:{${key}}:queue`);
      const lengths = (await pipeline.exec()) ?? [];
      return lengths.every(([, length]) => Number(length) === 1);
    }, 20_000);
    await holder.kill();
    const killedAt = performance.now();
    const grants = await Promise.all(granting);
    const afterKill = grants.map(({ at }) => Math.round(at - killedAt));
    const all = Math.max(...afterKill);
    console.log(
      `[sessions] freeOnDisconnect: all ${count} locks of a SIGKILLed holder granted to their waiters ${all} ms after the kill (first ${Math.min(...afterKill)} ms, session TTL ${sessionTtl} ms)`,
    );
    expect(all).toBeLessThan(2_000);
    await Promise.all(grants.map(({ handle }) => handle.release()));
  });

  it('without it, the same lock waits for the session to lapse', async () => {
    const holder = await startHolder('killed-plain', false, shortTtl);
    const waiting = waitFor('killed-plain');
    await sleep(300);
    holder.child.kill('SIGKILL');
    const killedAt = performance.now();
    const { grantedAt } = await waiting;
    const afterKill = Math.round(grantedAt - killedAt);
    console.log(
      `[sessions] without freeOnDisconnect: granted ${afterKill} ms after the kill (session TTL ${shortTtl} ms)`,
    );
    // Its last renewal was at most a third of the TTL before the kill.
    expect(afterKill).toBeGreaterThan((shortTtl * 2) / 3 - 100);
    expect(afterKill).toBeLessThan(shortTtl + 1_000);
  });

  it('tells a holder whose connection drops that its lock is lost before a waiter gets it', async () => {
    const holder = fixture.open({
      url: fixture.proxy.url,
      sessionTtl,
      freeOnDisconnect: true,
    });
    const lost: { at: number; event: LockLostEvent }[] = [];
    holder.locks.events.on('lost', (event) =>
      lost.push({ at: performance.now(), event }),
    );
    const handle = await holder.locks.acquire('dropped');
    const waiting = waitFor('dropped');
    await sleep(300);
    fixture.proxy.cutAll();
    const { grantedAt } = await waiting;
    expect(lost.map(({ event }) => event.reason)).toEqual(['session-expired']);
    expect(lost[0].at).toBeLessThan(grantedAt);
    expect(handle.lost).toBe(true);
  });

  it('keeps a frozen holder’s lock until its session lapses: its connection stays open', async () => {
    const holder = await startHolder('frozen', true, shortTtl);
    const waiting = waitFor('frozen');
    await sleep(300);
    setProcessStopped(holder.child.pid ?? 0, true);
    const frozenAt = performance.now();
    try {
      const { grantedAt, fence } = await waiting;
      const afterFreeze = Math.round(grantedAt - frozenAt);
      // Its last renewal was at most a third of the TTL before the freeze.
      expect(afterFreeze).toBeGreaterThan((shortTtl * 2) / 3 - 100);
      expect(afterFreeze).toBeLessThan(shortTtl + 1_000);
      expect(fence).toBeGreaterThan(holder.fence);
    } finally {
      setProcessStopped(holder.child.pid ?? 0, false);
    }
  });
});
