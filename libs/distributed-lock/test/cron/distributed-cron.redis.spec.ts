/**
 * The distributed-cron proof: three processes run the same Nest app (see
 * fixtures/cron-instance.ts), whose job on `@Cron('* * * * * *')` is wrapped
 * by `@DistributedLock` with `onBusy: 'skip'` and `minHoldTime: 500`, against
 * one Redis; one of them takes the lock 150 ms late, as a clock that far
 * behind would. Each run records its start, works 200 ms, then counts its
 * tick. Two instances are SIGKILLed:
 *
 * - the one that ran the latest tick, after its job, while its lock is left
 *   to expire: the next tick still runs, once;
 * - then the one running the current tick, during its job: that tick is
 *   never run again, and the ticks resume on the last instance at the first
 *   tick after the dead one's session lapsed (`sessionTtl` 2 s here).
 *
 * No tick may ever start twice, every other tick must run exactly once, and
 * nobody may have logged an error.
 *
 * CI runs a short form (FAULT_SECONDS, 8 s by default);
 * `npm run test:cron:long` runs it for 20 s.
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
/** How long each run works: the time there is to kill a runner mid-job. */
const jobMs = 200;
/** Short, so that the ticks a dead runner's lock blocks are few. */
const sessionTtl = 2_000;
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

interface Start {
  readonly tick: number;
  readonly name: string;
  /** When the run started, ms since epoch. */
  readonly at: number;
}

const parseStart = (entry: string | null): Start | undefined => {
  if (!entry) return undefined;
  const [tick, name, at] = entry.split(' ');
  return { tick: Number(tick), name, at: Number(at) };
};

/** The last tick counted as run (its job finished), or -1. */
const lastCounted = async () =>
  Number((await observer.lindex('cron:log', -1))?.split(' ')[0] ?? -1);

/** The first run that started for tick `tick` or later, by `deadline`. */
async function startAtOrAfter(
  tick: number,
  deadline: number,
): Promise<Start | undefined> {
  for (;;) {
    const last = parseStart(await observer.lindex('cron:started', -1));
    if (last && last.tick >= tick) {
      const all = await observer.lrange('cron:started', 0, -1);
      return all.map(parseStart).find((start) => start!.tick >= tick);
    }
    if (Date.now() > deadline) return undefined;
    await sleep(5);
  }
}

const instanceNamed = (name: string) => instances.find((i) => i.name === name)!;

/**
 * SIGKILLs the instance that ran the latest tick, from tick `from` on, once
 * its job is over and its lock left to expire (a lease of at most
 * minHoldTime), before that lease ends: the first tick where that moment is
 * caught (a loaded machine may miss one).
 */
async function killDuringLeftover(from: number) {
  for (let tick = from; tick < from + 4; tick++) {
    const start = await startAtOrAfter(tick, (tick + 1) * 1000);
    if (start?.tick !== tick) continue;
    while (Date.now() < (tick + 1) * 1000) {
      const left = await observer.pttl('lock:{cron:tick}');
      if ((await lastCounted()) === tick && left > 0 && left <= minHoldTime) {
        const killed = instanceNamed(start.name);
        await killed.kill();
        return { killed, tick };
      }
      await sleep(2);
    }
  }
  return undefined;
}

/**
 * SIGKILLs the instance running tick `from` (or a later one) during its job:
 * after the run started, before it was counted.
 */
async function killDuringJob(from: number) {
  for (let tick = from; tick < from + 4; tick++) {
    const start = await startAtOrAfter(tick, (tick + 1) * 1000);
    if (start === undefined || (await lastCounted()) >= start.tick) continue;
    const killed = instanceNamed(start.name);
    const killedAt = Date.now();
    await killed.kill();
    return { killed, killedAt, tick: start.tick };
  }
  return undefined;
}

/** How many times each tick was counted as run, by tick. */
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
  `runs each 1 s tick once on 3 instances for ${seconds} s, across a SIGKILL after a job and one during a job`,
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
          jobMs,
          sessionTtl,
        }),
      );
    await Promise.all(instances.map((i) => i.started(startPatienceMs)));

    // Every instance's job is scheduled by the next second; one more lets
    // their start-up work settle. Ticks before run on fewer instances and
    // count only towards "never twice".
    const firstTick = Math.ceil(Date.now() / 1000) + 1;
    const afterJob = await killDuringLeftover(
      firstTick + Math.floor(seconds / 4),
    );
    const duringJob = await killDuringJob((afterJob?.tick ?? firstTick) + 2);
    const resumed = duringJob
      ? await startAtOrAfter(
          duringJob.tick + 1,
          duringJob.killedAt + sessionTtl + 3_000,
        )
      : undefined;
    const lastTick = Math.max(
      firstTick + seconds - 1,
      (resumed?.tick ?? 0) + 1,
    );

    // The last tick in the window is recorded well within a second.
    await sleepUntil((lastTick + 2) * 1000);
    const killed = [afterJob?.killed, duringJob?.killed];
    await Promise.all(
      instances.filter((i) => !killed.includes(i)).map((i) => i.stop()),
    );

    const runs = await runsByTick();
    const log = await observer.lrange('cron:log', 0, -1);
    const starts = (await observer.lrange('cron:started', 0, -1)).map((entry) =>
      parseStart(entry)!,
    );
    const context = `runs by tick ${JSON.stringify([...runs])}, log ${JSON.stringify(log)}, starts ${JSON.stringify(starts)}`;
    expect(
      afterJob,
      `no runner caught after its job; ${context}`,
    ).toBeDefined();
    expect(duringJob, `no runner caught in its job; ${context}`).toBeDefined();
    expect(resumed, `no tick ran after the kill; ${context}`).toBeDefined();

    console.log(
      `[cron] ticks ${firstTick}..${lastTick}: ${afterJob!.killed.name} killed after tick ` +
        `${afterJob!.tick}'s job, ${duringJob!.killed.name} during tick ${duringJob!.tick}'s; ` +
        `resumed on ${resumed!.name} at tick ${resumed!.tick}, ` +
        `${resumed!.at - duringJob!.killedAt} ms after the kill (sessionTtl ${sessionTtl})`,
    );

    // Never twice: neither started nor counted.
    const startsOf = (tick: number) => starts.filter((s) => s.tick === tick);
    for (const { tick } of starts)
      expect(startsOf(tick), `tick ${tick}; ${context}`).toHaveLength(1);
    for (const [tick, count] of runs)
      expect(count, `tick ${tick}; ${context}`).toBe(1);

    // The interrupted tick started once, on the killed instance, and was
    // never run again; the ticks its lock blocked were skipped everywhere.
    expect(startsOf(duringJob!.tick)[0].name, context).toBe(
      duringJob!.killed.name,
    );
    expect(runs.get(duringJob!.tick), context).toBeUndefined();
    for (let tick = firstTick; tick <= lastTick; tick++) {
      if (tick === duringJob!.tick) continue;
      const blocked = tick > duringJob!.tick && tick < resumed!.tick;
      expect(runs.get(tick), `tick ${tick}; ${context}`).toBe(
        blocked ? undefined : 1,
      );
    }
    // Resumed on the first tick after the dead runner's session lapsed: at
    // most sessionTtl after the kill, plus the wait for that tick.
    expect(resumed!.at - duringJob!.killedAt, context).toBeLessThanOrEqual(
      sessionTtl + 1_000 + lateByMs + 100,
    );
    for (const { killed: dead, tick } of [afterJob!, duringJob!])
      for (const start of starts.filter((s) => s.tick > tick))
        expect(start.name, context).not.toBe(dead.name);

    for (const instance of instances) {
      expect(instance.lines('ERROR'), instance.name).toEqual([]);
      expect(
        instance.lines('WARN').filter((line) => line.includes('lost')),
        instance.name,
      ).toEqual([]);
      expect(instance.log, instance.name).not.toContain('[Cron] error');
    }
    // The others let every tick go quietly, at debug level: at least one
    // skip a tick while two or more instances lived.
    const skips = instances.flatMap((i) =>
      i.lines('DEBUG').filter((line) => line.includes('skipped')),
    );
    expect(skips.length).toBeGreaterThanOrEqual(
      duringJob!.tick - firstTick + 1,
    );
  },
);
