/**
 * Several processes take turns holding one lock and writing to a fenced
 * resource with their fencing tokens, while holders are frozen (SIGSTOP) at
 * random for up to twice their lease. A frozen holder's lease lapses and the
 * lock moves on: the referee checks that no fencing token was ever answered
 * to two holders, that every write the resource rejected came from a holder
 * whose lock was indeed lost, and that everyone made progress.
 *
 * CI runs a short form (4 s). `npm run test:faults:long` runs it for
 * FAULT_SECONDS (60 by default there).
 */
import { FencedResource } from '../../../../test/support/fenced-resource.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startLockHolder,
  type HolderEvent,
  type LockHolder,
} from '../../../../test/support/lock-holder.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 4);
const leaseMs = 600;

let server: RedisServerHandle;
let resource: FencedResource;

beforeAll(async () => {
  server = await startRedisServer();
  resource = new FencedResource();
});

afterAll(async () => {
  await resource.close();
  await server.stop();
});

/**
 * Freezes a random holder for 100 ms to twice the lease, over and over, until
 * `until`. Holders that finished their rounds are left alone.
 */
async function freezeAtRandom(
  holders: LockHolder[],
  until: number,
): Promise<number> {
  let pauses = 0;
  while (Date.now() < until) {
    await sleep(200 + Math.random() * 400);
    const running = holders.filter(
      (holder) => !holder.events.some((event) => event.event === 'done'),
    );
    if (running.length === 0) break;
    const holder = running[Math.floor(Math.random() * running.length)];
    try {
      holder.pause();
    } catch {
      continue; // it finished in the meantime
    }
    pauses += 1;
    await sleep(100 + Math.random() * 2 * leaseMs);
    holder.resume();
  }
  return pauses;
}

/** The events of each round of one holder: from `acquired` to `released`. */
function rounds(events: readonly HolderEvent[]): HolderEvent[][] {
  const all: HolderEvent[][] = [];
  for (const event of events) {
    if (event.event === 'acquired') all.push([event]);
    else if (all.length > 0) all[all.length - 1].push(event);
  }
  return all;
}

it(
  `holders frozen at random for ${seconds} s: no fencing token twice, every rejected write from a lost lock`,
  async () => {
    const resourceUrl = await resource.serve();
    const holders = ['a', 'b', 'c'].map((name) =>
      startLockHolder({
        url: server.url,
        key: 'paused-holders',
        name,
        watchdogLeaseTime: leaseMs,
        handoffLeaseMs: leaseMs,
        waitTime: 30_000,
        holdMs: 20,
        writeEveryMs: 10,
        fence: true,
        resourceUrl,
        repeatForMs: seconds * 1000,
      }),
    );
    await Promise.all(holders.map((holder) => holder.waitFor('ready', 20_000)));
    // Stops a second before the first holder's rounds are over.
    const pauses = await freezeAtRandom(
      holders,
      Date.now() + seconds * 1000 - 1000,
    );
    await Promise.all(holders.map((holder) => holder.waitFor('done', 60_000)));

    const fences: number[] = [];
    const lostFences = new Set<number>();
    for (const holder of holders) {
      const errors = holder.events.filter((event) => event.event === 'error');
      expect(errors).toEqual([]);
      const mine = rounds(holder.events);
      expect(mine.length).toBeGreaterThan(0);
      for (const round of mine) {
        fences.push(Number(round[0].fence));
        const released = round.find((event) => event.event === 'released');
        const rejected = round.some(
          (event) => event.event === 'wrote' && event.accepted === false,
        );
        // A write is rejected only when a later holder wrote first: then this
        // holder's lock was gone, and its release says so.
        if (rejected) expect(released?.result).toBe(false);
        if (released?.result === false) lostFences.add(Number(round[0].fence));
      }
    }
    console.log(
      `paused-holders: ${seconds} s, ${pauses} pauses, ${fences.length} holds, ` +
        `${lostFences.size} lost under a pause, writes accepted ${resource.accepted} / ` +
        `rejected ${resource.rejected}, overlaps ${resource.overlaps}`,
    );
    expect(new Set(fences).size).toBe(fences.length);
    // Holders overlapped only where one of them had lost its lock under a pause.
    for (const overlap of resource.overlapLog) {
      const tokens = [overlap.token, ...overlap.inside.map((i) => i.token)];
      expect(tokens.some((token) => lostFences.has(Number(token)))).toBe(true);
    }
    expect(pauses).toBeGreaterThan(0);
  },
  120_000 + seconds * 2_000,
);
