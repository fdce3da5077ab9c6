/**
 * Stress runs: many callers in several services on a few keys, with short
 * waits, aborts and holds, checked for two holders inside at once and for
 * fencing tokens that do not rise.
 */
import {
  LockBackendError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type LockHandle,
} from '@app/distributed-lock';
import { expectNothingLeft } from '../../../../test/support/backend-internals.js';
import type { OpenedLocks } from '../../../../test/support/lock-clients.js';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { startRedisServer } from '../../../../test/support/redis-server.js';
import { useAdversarialFixture } from './helpers.js';

const fixture = useAdversarialFixture();
const { open, queueLength } = fixture;

interface StressOptions {
  readonly services: OpenedLocks[];
  readonly loopsPerService: number;
  /** Keys of one acquisition. */
  readonly pickKeys: () => string[];
  /** Run until this returns true (checked before each iteration). */
  readonly done: (iteration: number) => boolean;
  readonly commandTimeoutMs: number;
  /** Chance that an acquisition uses this explicit lease instead of the watchdog. */
  readonly explicitLease?: { chance: number; leaseTime: number };
}

interface StressResult {
  acquired: number;
  busy: number;
  aborted: number;
  backendErrors: number;
  unexpected: unknown[];
  /** Overlapping holders, with when they were seen. */
  violations: Array<{ key: string; at: number }>;
  /** Per key, fencing tokens in the order the critical sections started, with when. */
  fences: Map<string, Array<{ fence: number; at: number }>>;
  /** Acquisitions that settled later than their wait time allows. */
  overdue: Array<{ waitTime: number; tookMs: number }>;
}

/** 0 (try once), a short wait that often runs out, or a longer one. */
function pickWait(): number {
  const r = Math.random();
  if (r < 0.15) return 0;
  if (r < 0.55) return 1 + Math.floor(Math.random() * 20);
  return 50 + Math.floor(Math.random() * 350);
}

/**
 * Many callers in several services fight over a few keys with short random
 * waits (some time out, some are aborted) and 0-3 ms holds, and record anyone
 * found inside a critical section that someone else is in.
 */
async function stress(options: StressOptions): Promise<StressResult> {
  const result: StressResult = {
    acquired: 0,
    busy: 0,
    aborted: 0,
    backendErrors: 0,
    unexpected: [],
    violations: [],
    fences: new Map(),
    overdue: [],
  };
  const inside = new Map<string, number>();
  async function once(locks: LockService): Promise<void> {
    const keys = options.pickKeys();
    const waitTime = pickWait();
    const controller = Math.random() < 0.15 ? new AbortController() : undefined;
    if (controller) {
      setTimeout(() => controller.abort(), Math.random() * 15);
      result.aborted++;
    }
    const explicit = options.explicitLease;
    const leaseTime =
      explicit && Math.random() < explicit.chance
        ? explicit.leaseTime
        : undefined;
    const started = performance.now();
    let handle: LockHandle;
    try {
      handle = await locks.acquire(keys, {
        waitTime,
        leaseTime,
        signal: controller?.signal,
      });
    } catch (error) {
      if (error instanceof LockNotAcquiredError) result.busy++;
      else if (error instanceof LockBackendError) result.backendErrors++;
      else result.unexpected.push(error);
      return;
    } finally {
      const tookMs = performance.now() - started;
      // The bare SET, one call to queue, the wait, one call to leave the
      // queue (the service may make one such round per key).
      if (tookMs > waitTime + 3 * options.commandTimeoutMs * keys.length + 300)
        result.overdue.push({ waitTime, tookMs });
    }
    result.acquired++;
    let fences: ReadonlyMap<string, number>;
    try {
      fences = await handle.fences();
    } catch (error) {
      // Lost before its token was issued (Redis restarted): it gets none.
      if (error instanceof LockBackendError) result.backendErrors++;
      else if (!(error instanceof LockLostError)) result.unexpected.push(error);
      await handle.release().catch(() => undefined);
      return;
    }
    const at = performance.now();
    for (const key of keys) {
      if ((inside.get(key) ?? 0) > 0) result.violations.push({ key, at });
      inside.set(key, (inside.get(key) ?? 0) + 1);
      let seen = result.fences.get(key);
      if (!seen) result.fences.set(key, (seen = []));
      seen.push({ fence: fences.get(key) ?? -1, at });
    }
    const hold = Math.floor(Math.random() * 4);
    await (hold === 0 ? Promise.resolve() : sleep(hold));
    if (handle.lost) result.unexpected.push(new Error('lost while held'));
    for (const key of keys) inside.set(key, (inside.get(key) ?? 0) - 1);
    try {
      await handle.release();
    } catch (error) {
      if (error instanceof LockBackendError) result.backendErrors++;
      else result.unexpected.push(error);
    }
  }

  await Promise.all(
    options.services.flatMap(({ locks }) =>
      Array.from({ length: options.loopsPerService }, async () => {
        for (let i = 0; !options.done(i); i++) await once(locks);
      }),
    ),
  );
  if (process.env.STRESS_DEBUG)
    console.log(
      JSON.stringify({
        ...result,
        fences: [...result.fences].map(([k, v]) => [k, v.length]),
      }),
    );
  return result;
}

function expectRisingFences(
  fences: Map<string, Array<{ fence: number; at: number }>>,
  from = 0,
): void {
  for (const [key, seen] of fences) {
    const after = seen.filter((s) => s.at >= from).map((s) => s.fence);
    for (let i = 1; i < after.length; i++) {
      if (!(after[i] > after[i - 1])) {
        throw new Error(
          `fencing tokens of ${key} do not rise: ${after.slice(Math.max(0, i - 3), i + 3).join(', ')}`,
        );
      }
    }
  }
}

describe('stress', () => {
  it('3 services x 10 callers on one key: one holder at a time, rising fences, nothing left over', async () => {
    const commandTimeoutMs = 2_000;
    const services = [open(), open(), open()];
    const result = await stress({
      services,
      loopsPerService: 10,
      pickKeys: () => ['hot'],
      done: (i) => i >= 100,
      commandTimeoutMs,
    });
    expect(result.unexpected).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.overdue).toEqual([]);
    expect(result.backendErrors).toBe(0);
    expect(result.acquired).toBeGreaterThan(100);
    expect(result.busy).toBeGreaterThan(0);
    expectRisingFences(result.fences);
    expect(await fixture.redis.exists('lock:{hot}')).toBe(0);
    await eventually(async () => (await queueLength('hot')) === 0, 2_000);
    await sleep(50);
    for (const { backend } of services) expectNothingLeft(backend);
  });

  it('3 services x 10 callers on overlapping key sets, short hand-off leases, some explicit leases: per-key exclusion and rising fences', async () => {
    const commandTimeoutMs = 2_000;
    const services = [
      open({ handoffLeaseMs: 150 }),
      open({ handoffLeaseMs: 150 }),
      open(),
    ];
    const names = ['p', 'q', 'r'];
    const result = await stress({
      services,
      loopsPerService: 10,
      pickKeys: () => {
        const first = names[Math.floor(Math.random() * names.length)];
        if (Math.random() < 0.5) return [first];
        const second = names[Math.floor(Math.random() * names.length)];
        return [...new Set([first, second])];
      },
      done: (i) => i >= 80,
      commandTimeoutMs,
      explicitLease: { chance: 0.4, leaseTime: 250 },
    });
    expect(result.unexpected).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.overdue).toEqual([]);
    expect(result.acquired).toBeGreaterThan(100);
    expectRisingFences(result.fences);
    for (const name of names) {
      expect(await fixture.redis.exists(`lock:{${name}}`)).toBe(0);
      await eventually(async () => (await queueLength(name)) === 0, 2_000);
    }
    await sleep(50);
    for (const { backend } of services) expectNothingLeft(backend);
  });

  it('recovers from a Redis restart in the middle of contention', async () => {
    const own = await startRedisServer();
    try {
      const commandTimeoutMs = 400;
      const settings = {
        url: own.url,
        commandTimeoutMs,
        handoffLeaseMs: 300,
        watchdogLeaseTime: 600,
      };
      const services = [open(settings), open(settings), open(settings)];
      const start = performance.now();
      let restartedAt = Number.POSITIVE_INFINITY;
      const restart = (async () => {
        await sleep(700);
        await own.restart();
        restartedAt = performance.now();
      })();
      const result = await stress({
        services,
        loopsPerService: 10,
        pickKeys: () => ['restart'],
        done: () => performance.now() > restartedAt + 2_000,
        commandTimeoutMs,
      });
      await restart;
      expect(performance.now() - start).toBeLessThan(8_000);
      expect(result.unexpected).toEqual([]);
      expect(result.overdue).toEqual([]);
      // Held locks vanish with the data; once the old holders' leases have
      // run out, one holder at a time again, and the fences rise again
      // (from 1: the counter was lost too).
      const settled = restartedAt + 600 + 300;
      expect(result.violations.filter((v) => v.at > settled)).toEqual([]);
      expectRisingFences(result.fences, settled);
      const after = result.fences.get('restart')?.filter((s) => s.at > settled);
      expect(after?.length ?? 0).toBeGreaterThan(20);
      // Every service works normally afterwards.
      for (const { locks } of services) {
        const handle = await locks.acquire('restart', { waitTime: 2_000 });
        expect(await handle.release()).toBe(true);
      }
      await sleep(100);
      for (const { backend } of services) expectNothingLeft(backend);
    } finally {
      await own.stop();
    }
  });
});
