/**
 * `fence: true` on one Redis: the fencing token is issued by the command that
 * grants the lock, whether that is the uncontended acquisition or a pass in
 * memory between two callers of one process, so a fenced lock cycle costs
 * no more round trips than an unfenced one.
 */
import { LockBackendError } from '@app/distributed-lock';
import {
  waitingIn,
  type OpenedLocks,
} from '../../../test/support/lock-clients.js';
import { eventually } from '../../../test/support/lock-fixtures.js';
import { useRedisFixture } from '../../../test/support/redis-fixture.js';
import { openMonitor } from '../../../test/support/redis-monitor.js';

const fixture = useRedisFixture();

/**
 * Records the commands clients send on `name`'s lock key (commands scripts
 * run inside are left out), until `stop` syncs on a marker that `s` sends:
 * MONITOR reports commands in the order Redis ran them, so every command
 * `s` sent before the marker is in by then.
 */
async function recordCommandsOn(name: string): Promise<{
  readonly sent: string[];
  readonly stop: (s: OpenedLocks) => Promise<void>;
}> {
  const monitor = await openMonitor(fixture.redis);
  const lockKey = `lock:{${name}}`;
  const marker = `end-of-recording-${name}`;
  const sent: string[] = [];
  let markerSeen = false;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source.includes('lua')) return;
    if (args.includes(marker)) markerSeen = true;
    else if (args.includes(lockKey)) sent.push(args[0].toLowerCase());
  });
  return {
    sent,
    async stop(s) {
      await s.client.echo(marker);
      await eventually(() => markerSeen);
      monitor.disconnect();
    },
  };
}

/** A script run: EVALSHA, or EVAL the first time a connection runs the script. */
const oneScriptRun = expect.stringMatching(/^eval(sha)?$/) as string;

/** The key's fencing counter in Redis. */
async function counterOf(name: string): Promise<number> {
  return Number(await fixture.redis.get(`lock:{${name}}:fence`));
}

describe('fence: true on one Redis', () => {
  it('takes an uncontended lock and its fencing token in one command; fence() then sends none', async () => {
    const s = fixture.open();
    await (await s.locks.acquire('warm-up', { fence: true })).release();

    const recording = await recordCommandsOn('fenced');
    const handle = await s.locks.acquire('fenced', {
      leaseTime: 5_000,
      fence: true,
    });
    const token = handle.fencingToken;
    expect(await handle.fence()).toBe(token);
    await recording.stop(s);

    expect(recording.sent).toEqual([oneScriptRun]);
    expect(token).toBe(await counterOf('fenced'));
    expect(await fixture.redis.get('lock:{fenced}')).toBe(handle.token);
    expect(await handle.release()).toBe(true);
  });

  it('passes a lock on in memory to a waiter of the same process with its token, in the one command of the pass', async () => {
    const s = fixture.open();
    const rival = fixture.open();
    const options = { leaseTime: 5_000, waitTime: 5_000, fence: true };
    // Handed over from the queue: held here under contention, so the next
    // waiter here gets it passed on in memory.
    const blocker = await rival.locks.acquire('passed', options);
    const queued = s.locks.acquire('passed', options);
    await eventually(
      async () => (await fixture.redis.llen('lock:{passed}:queue')) === 1,
    );
    await blocker.release();
    const first = await queued;

    const waiting = s.locks.acquire('passed', options);
    await eventually(() => waitingIn(s.backend) === 1);
    const recording = await recordCommandsOn('passed');
    await first.release();
    const second = await waiting;
    const token = second.fencingToken;
    expect(await second.fence()).toBe(token);
    await recording.stop(s);

    // pass-on.lua alone: no fence.lua after it.
    expect(recording.sent).toEqual([oneScriptRun]);
    expect(token).toBeGreaterThan(first.fencingToken!);
    expect(token).toBe(await counterOf('passed'));
    // Still stored under the token the lock came to this process with.
    expect(await fixture.redis.get('lock:{passed}')).toBe(first.token);
    expect(await second.release()).toBe(true);
  });

  it('takes a lock whose holder expired while others queued, as the bare SET does, and its release serves them', async () => {
    const s = fixture.open();
    // A waiter of another process, queued while the last holder's lease ran
    // out: its entry is "<deadline ms>|<grant lease ms>|<token>|<wake list>".
    const [seconds] = await fixture.redis.time();
    const entry = `${Number(seconds) * 1000 + 60_000}|5000|queued-token|other:wake`;
    await fixture.redis.rpush('lock:{expired}:queue', entry);
    const before = await counterOf('expired');

    const held = await s.locks.tryAcquire('expired', { fence: true });

    expect(held?.fencingToken).toBeGreaterThan(before);
    expect(await fixture.redis.get('lock:{expired}')).toBe(held!.token);
    expect(await fixture.redis.llen('lock:{expired}:queue')).toBe(1);
    expect(await held!.release()).toBe(true);
    expect(await fixture.redis.get('lock:{expired}')).toBe('queued-token');
    expect(await fixture.redis.llen('lock:{expired}:queue')).toBe(0);
    // Woken with its token, issued with the grant, after the newcomer's.
    const [message] = await fixture.redis.lrange('other:wake', 0, -1);
    expect(message).toMatch(/^queued-token\|\d+\|lock:\{expired\}$/);
    expect(Number(message.split('|')[1])).toBeGreaterThan(held!.fencingToken!);
    await fixture.redis.del('lock:{expired}', 'other:wake');
  });

  it('gives back a lock whose fenced acquisition was answered after it timed out', async () => {
    const s = fixture.open({ commandTimeoutMs: 200 });
    await (await s.locks.acquire('late-warm-up', { fence: true })).release();
    const tokenBefore = await counterOf('late-fenced');
    await fixture.redis.call('CLIENT', 'PAUSE', '500', 'WRITE');
    await expect(
      s.locks.acquire('late-fenced', { waitTime: 0, fence: true }),
    ).rejects.toBeInstanceOf(LockBackendError);
    // The late run took the lock and issued a token; it is freed at once
    // rather than at its lease's end.
    await eventually(
      async () => (await counterOf('late-fenced')) > tokenBefore,
    );
    await eventually(
      async () => (await fixture.redis.exists('lock:{late-fenced}')) === 0,
    );
    const lateToken = await counterOf('late-fenced');
    const next = await fixture
      .open()
      .locks.acquire('late-fenced', { waitTime: 0, fence: true });
    expect(next.fencingToken).toBeGreaterThan(lateToken);
    expect(await next.release()).toBe(true);
  });
});
