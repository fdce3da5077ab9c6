import { summarize } from '../stats.js';
import type { ContentionEvents } from './contention-core.js';
import { fairnessOf } from './contention-analysis.js';

/** The figures of one semaphore window (I). */
export interface SemaphoreFigures {
  readonly acquisitions: number;
  readonly acquisitionsPerSec: number;
  /** Wait from asking to holding, ms (a wait begun before the window counts from its start). */
  readonly waitP50: number;
  readonly waitP99: number;
  /** Longest wait, including waits still open when the window ended, ms. */
  readonly longestWaitMs: number;
  /** As in C: most acquisitions of one caller over the fewest (Infinity when one got none). */
  readonly fairness: number;
  readonly starved: number;
  readonly perCaller: number[];
  /** Most holders seen at once (must not exceed the limit; near 1 with a 0 ms hold, which has no length to overlap). */
  readonly maxHolders: number;
  /** Acquisitions that made more than `limit` holders at once (must be 0). */
  readonly overbooked: number;
  readonly failures: number;
  readonly stragglers: number;
  readonly firstError?: string;
}

/**
 * Slack for the processes' clocks, ms (as C's overlaps): a hold counts from
 * its acquisition to this much before its release began.
 */
const clockSlackMs = 0.05;

/**
 * Holders at once, from the holds' stamps on the shared clock: each hold runs
 * from the moment its acquisition resolved to the moment its release began
 * (less the clock slack), inside the time the store had it as a holder, so a
 * count above the limit is a real overbooking, never an artefact of the
 * stamps. Returns the most seen at once and the acquisitions that made more
 * than `limit`.
 */
export function holdersAtOnce(
  holds: readonly { readonly acq: number; readonly rel: number }[],
  limit: number,
): { maxHolders: number; overbooked: number } {
  // [time, +1 start / -1 end]; at equal times ends go first.
  const events: [number, number][] = [];
  for (const { acq, rel } of holds) {
    events.push([acq, 1], [Math.max(rel - clockSlackMs, acq + 1e-9), -1]);
  }
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let holding = 0;
  let maxHolders = 0;
  let overbooked = 0;
  for (const [, delta] of events) {
    holding += delta;
    if (delta > 0 && holding > limit) overbooked += 1;
    maxHolders = Math.max(maxHolders, holding);
  }
  return { maxHolders, overbooked };
}

/** Merges the processes' events of one semaphore window and computes its figures. */
export function analyzeSemaphore(
  parts: readonly ContentionEvents[],
  callers: number,
  limit: number,
  startAt: number,
  windowMs: number,
): SemaphoreFigures {
  const end = startAt + windowMs;
  const holds: { acq: number; rel: number }[] = [];
  const waits: number[] = [];
  const perCaller = Array.from({ length: callers }, () => 0);
  let longestWait = 0;
  let failures = 0;
  let stragglers = 0;
  let firstError: string | undefined;
  for (const part of parts) {
    const a = part.acquisitions;
    for (let i = 0; i < a.length; i += 4) {
      const [who, wait, acq, rel] = [a[i], a[i + 1], a[i + 2], a[i + 3]];
      perCaller[who] += 1;
      holds.push({ acq, rel });
      const waited = acq - Math.max(wait, startAt);
      waits.push(waited);
      longestWait = Math.max(longestWait, waited);
    }
    for (let i = 0; i < part.openWaits.length; i += 2) {
      longestWait = Math.max(longestWait, end - part.openWaits[i + 1]);
    }
    failures += part.failures;
    stragglers += part.stragglers;
    firstError ??= part.firstError;
  }
  const wait = summarize(waits);
  return {
    acquisitions: holds.length,
    acquisitionsPerSec: (holds.length * 1000) / windowMs,
    waitP50: wait.p50,
    waitP99: wait.p99,
    longestWaitMs: longestWait,
    ...fairnessOf(perCaller),
    perCaller,
    ...holdersAtOnce(holds, limit),
    failures,
    stragglers,
    firstError,
  };
}
