/**
 * The distributed-cron proof: three processes run the same Nest app (see
 * fixtures/cron-instance.ts), whose job on `@Cron('* * * * * *')` is wrapped
 * by `@DistributedLock` with `onBusy: 'skip'` and `minHoldTime: 500`, against
 * one Redis; one of them takes the lock 150 ms late, as a clock that far
 * behind would. Each run counts its tick in Redis. Halfway through, the
 * instance that ran the latest tick is SIGKILLed while its lock is still
 * left to expire. Every tick must have run exactly once, the one after the
 * kill included, and nobody may have logged an error.
 *
 * CI runs a short form (FAULT_SECONDS, 8 s by default, the kill after 4);
 * `FAULT_SECONDS=20 npx vitest run <this file>` runs the long one.
 */
import { Redis } from 'ioredis';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { CronInstance } from './cron-instances.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 8);
/** Half the period: tolerates the most lateness of a tick either way. */
const minHoldTime = 500;
/** How late instance c takes the lock on each tick: a clock that far behind. */
const lateByMs = 150;
/** Three Nest apps compiled by SWC at once on a loaded 2-core machine. */
const startPatienceMs = 90_000;

let server: RedisServerHandle;
let observer: Redis;
const instances: CronInstance[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
});

afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()));
  observer?.disconnect();
  await server?.stop();
});

/** Resolves at `epochMs` on the wall clock (the clock cron ticks on). */
const sleepUntil = (epochMs: number) =>
  sleep(Math.max(0, epochMs - Date.now()));

/** Who ran `tick`, once it was recorded; undefined if nobody did by `deadline`. */
async function runnerOf(
  tick: number,
  deadline: number,
): Promise<string | undefined> {
  for (;;) {
    const last = await observer.lindex('cron:log', -1);
    const [ran, name] = (last ?? '').split(' ');
    if (Number(ran) === tick) return name;
    if (Number(ran) > tick || Date.now() > deadline) return undefined;
    await sleep(5);
  }
}

/**
 * SIGKILLs the instance that ran the latest tick, from tick `from` on, once
 * its job is over and its lock left to expire (a lease of at most
 * minHoldTime), before that lease ends: the first tick where that moment is
 * caught (a loaded machine may miss one). Returns the instance and the
 * tick; undefined when no lock was left to expire in five ticks.
 */
async function killDuringLeftover(
  from: number,
): Promise<{ killed: CronInstance; tick: number } | undefined> {
  for (let tick = from; tick < from + 5; tick++) {
    const name = await runnerOf(tick, (tick + 1) * 1000);
    if (name === undefined) continue;
    while (Date.now() < (tick + 1) * 1000) {
      const left = await observer.pttl('lock:{cron:tick}');
      if (left <= 0) break;
      if (left <= minHoldTime) {
        const killed = instances.find((i) => i.name === name)!;
        await killed.kill();
        return { killed, tick };
      }
      await sleep(2);
    }
  }
  return undefined;
}

/** How many times each tick ran, by tick. */
async function runsByTick(): Promise<Map<number, number>> {
  const keys = await observer.keys('cron:runs:*');
  const counts = keys.length > 0 ? await observer.mget(keys) : [];
  return new Map(
    keys.map((key, i) => [
      Number(key.slice('cron:runs:'.length)),
      Number(counts[i]),
    ]),
  );
}

it(
  `runs each 1 s tick exactly once on 3 instances for ${seconds} s, across a SIGKILL of the last runner`,
  { timeout: seconds * 1_000 + startPatienceMs + 30_000 },
  async () => {
    const orders = ['cron-above', 'lock-above', 'cron-calls-locked'] as const;
    for (const [i, name] of ['a', 'b', 'c'].entries())
      instances.push(
        new CronInstance({
          url: server.url,
          name,
          minHoldTime,
          order: orders[i],
          lateByMs,
        }),
      );
    await Promise.all(instances.map((i) => i.started(startPatienceMs)));

    // Every instance's job is scheduled by the next second; one more lets
    // their start-up work settle. Ticks before run on fewer instances and
    // count only towards "never twice".
    const firstTick = Math.ceil(Date.now() / 1000) + 1;
    const lastTick = firstTick + seconds - 1;

    const kill = await killDuringLeftover(
      firstTick + Math.floor(seconds / 2) - 1,
    );

    // The last tick in the window is recorded well within a second.
    await sleepUntil((lastTick + 2) * 1000);
    const survivors = instances.filter((i) => i !== kill?.killed);
    await Promise.all(survivors.map((i) => i.stop()));

    const runs = await runsByTick();
    const log = await observer.lrange('cron:log', 0, -1);
    const context = `runs by tick ${JSON.stringify([...runs])}, log ${JSON.stringify(log)}`;

    for (const [tick, count] of runs)
      expect(count, `tick ${tick}; ${context}`).toBe(1);
    for (let tick = firstTick; tick <= lastTick; tick++)
      expect(runs.get(tick), `tick ${tick}; ${context}`).toBe(1);
    expect(
      kill,
      `no runner was caught with its lock left to expire; ${context}`,
    ).toBeDefined();
    const afterKill = log.filter(
      (entry) => Number(entry.split(' ')[0]) > kill!.tick,
    );
    expect(afterKill.length, context).toBeGreaterThan(0);
    for (const entry of afterKill)
      expect(entry.endsWith(` ${kill!.killed.name}`), context).toBe(false);

    for (const instance of instances) {
      expect(instance.lines('ERROR'), instance.name).toEqual([]);
      expect(
        instance.lines('WARN').filter((line) => line.includes('lost')),
        instance.name,
      ).toEqual([]);
      expect(instance.log, instance.name).not.toContain('[Cron] error');
    }
    // The others let every tick go quietly, at debug level.
    const skips = instances.flatMap((i) =>
      i.lines('DEBUG').filter((line) => line.includes('skipped')),
    );
    expect(skips.length).toBeGreaterThanOrEqual(seconds);
  },
);
