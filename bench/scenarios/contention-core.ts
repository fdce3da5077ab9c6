import { setMaxListeners } from 'node:events';
import { nowMs, sleep, sleepUntil } from '../clock.js';
import type { ContenderInstance } from '../contenders/types.js';
import { errorText } from './context.js';
import type { Wakes } from './handoff-watch.js';
import { watchStalls, type Stalls } from './stall-watch.js';

/** One contention window, as run by one process for its share of the contenders. */
export interface ContentionSpec {
  readonly key: string;
  /** Contender numbers of this process's loops (one loop per contender). */
  readonly who: readonly number[];
  readonly holdMs: number;
  /** Shared clock (ms, see nowMs) at which every loop starts. */
  readonly startAt: number;
  readonly windowMs: number;
  readonly ttlMs: number;
  readonly drainMs: number;
  /** I: the semaphore's permits in all (each loop takes one); absent for locks. */
  readonly limit?: number;
  /**
   * J: each acquisition is a read with this probability, else a write (the
   * contender gets `mode`); absent: every acquisition is a plain one.
   */
  readonly readShare?: number;
  /** J: seed of every loop's read/write draws (with its contender number), so each contender sees the same mix. */
  readonly seed?: number;
  /** Probes only: record the process's event-loop delay and GC pauses over the window. */
  readonly watchStalls?: boolean;
  /**
   * Probes only, for this library's contenders: record each wake-up the
   * process read (see handoff-watch.ts), timed against the Redis at this URL.
   */
  readonly watchHandoffsAt?: string;
}

/** What one process saw; timestamps on the shared clock. */
export interface ContentionEvents {
  /** Flat quadruples: contender, wait began, acquired, release began. */
  readonly acquisitions: number[];
  /** Flat pairs: contender, wait began, for waits still open at the window's end. */
  readonly openWaits: number[];
  /** J (with `readShare`): one per acquisition, in order: 1 for a write, 0 for a read. */
  readonly modes?: number[];
  /** Acquisitions that gave up (retries exhausted, timed out). */
  readonly failures: number;
  /** Loops still busy when the drain time ran out. */
  readonly stragglers: number;
  readonly firstError?: string;
  /** With `watchStalls`: what held the process up during the window. */
  readonly stalls?: Stalls;
  /** With `watchHandoffsAt`: flat pairs, granted in Redis and read here (shared clock). */
  readonly wakes?: Wakes;
}

/**
 * Runs `spec.who.length` loops on one key: acquire, hold `holdMs` (0: release
 * at once), release, repeat, until the window ends. A failed acquisition
 * (the implementation gave up) is retried at once; the wait is measured from
 * the first attempt.
 */
export async function runContention(
  instance: ContenderInstance,
  spec: ContentionSpec,
): Promise<ContentionEvents> {
  const acquisitions: number[] = [];
  const openWaits: number[] = [];
  const modes: number[] = [];
  const { readShare } = spec;
  let failures = 0;
  let firstError: string | undefined;
  const end = spec.startAt + spec.windowMs;
  const stop = new AbortController();
  // Every waiting loop listens on it.
  setMaxListeners(spec.who.length + 10, stop.signal);
  let busy = 0;

  const loop = async (who: number) => {
    busy += 1;
    const draw = seededRandom((spec.seed ?? 0) * 1_000 + who);
    try {
      let waitStart = nowMs();
      let mode: 'read' | 'write' | undefined;
      while (waitStart < end) {
        let held;
        // A retried acquisition keeps its mode.
        mode ??=
          readShare === undefined
            ? undefined
            : draw() < readShare
              ? 'read'
              : 'write';
        try {
          held = await instance.acquire(spec.key, {
            ttlMs: spec.ttlMs,
            signal: stop.signal,
            limit: spec.limit,
            mode,
          });
        } catch (error) {
          if (stop.signal.aborted || nowMs() >= end) break;
          failures += 1;
          firstError ??= errorText(error);
          continue;
        }
        const acquiredAt = nowMs();
        if (spec.holdMs > 0) await sleep(spec.holdMs);
        const releaseAt = nowMs();
        try {
          await held.release();
        } catch (error) {
          firstError ??= `release: ${errorText(error)}`;
        }
        if (acquiredAt > end) break;
        acquisitions.push(who, waitStart, acquiredAt, releaseAt);
        if (mode !== undefined) modes.push(mode === 'write' ? 1 : 0);
        mode = undefined;
        waitStart = nowMs();
      }
      if (waitStart < end) openWaits.push(who, waitStart);
    } finally {
      busy -= 1;
    }
  };

  // Imported only when asked for: it loads this library, which the raw
  // contenders' processes must not.
  const stopWatchingHandoffs =
    spec.watchHandoffsAt === undefined
      ? undefined
      : await (
          await import('./handoff-watch.js')
        ).watchHandoffs(spec.watchHandoffsAt);
  await sleepUntil(spec.startAt);
  const stopWatching = spec.watchStalls ? watchStalls() : undefined;
  const loops = Promise.all(spec.who.map((who) => loop(who)));
  await sleepUntil(end);
  const stalls = stopWatching?.();
  const wakes = stopWatchingHandoffs?.();
  stop.abort();
  const drained = await Promise.race([
    loops.then(() => true),
    sleep(spec.drainMs).then(() => false),
  ]);
  return {
    acquisitions,
    openWaits,
    ...(readShare === undefined ? {} : { modes }),
    failures,
    stragglers: drained ? 0 : busy,
    firstError,
    ...(stalls ? { stalls } : {}),
    ...(wakes ? { wakes } : {}),
  };
}

/** mulberry32: a small seeded generator of numbers in [0, 1), for reproducible read/write mixes. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
