import { summarize } from '../stats.js';
import type { ContentionEvents } from './contention-core.js';
import { fairnessOf } from './contention-analysis.js';

/** The figures of one read-write lock window (J). */
export interface ReadWriteFigures {
  /** Reads and writes. */
  readonly acquisitions: number;
  /** Reads and writes per second (the ratio to the raw baseline is on it). */
  readonly acquisitionsPerSec: number;
  readonly reads: number;
  readonly readsPerSec: number;
  readonly writes: number;
  readonly writesPerSec: number;
  /** Wait from asking to holding, ms, per mode (a wait begun before the window counts from its start). */
  readonly readWaitP50: number;
  readonly readWaitP99: number;
  readonly writeWaitP50: number;
  readonly writeWaitP99: number;
  /** Longest wait of either mode, including waits still open when the window ended, ms. */
  readonly longestWaitMs: number;
  /** As in C: most acquisitions (reads and writes) of one caller over the fewest (Infinity when one got none). */
  readonly fairness: number;
  readonly starved: number;
  readonly perCaller: number[];
  /** Most read holds seen at once (1 for a lock that makes readers exclusive; near 1 with a 0 ms hold). */
  readonly maxReaders: number;
  /** Acquisitions that began while a hold they exclude was on: a write beside anyone, a read beside a write (must be 0). */
  readonly overlaps: number;
  readonly failures: number;
  readonly stragglers: number;
  readonly firstError?: string;
}

/** One hold on the shared clock: from its acquisition to the moment its release began. */
export interface ReadWriteHold {
  readonly acq: number;
  readonly rel: number;
  readonly write: boolean;
}

/** Slack for the processes' clocks, ms (as I's holders at once). */
const clockSlackMs = 0.05;

/**
 * Readers and writers at once, from the holds' stamps on the shared clock,
 * as I counts holders: each hold runs from its acquisition to its release
 * beginning (less the clock slack), inside the time the store had it, so an
 * overlap found here is a real one. Returns the most readers seen at once
 * and the acquisitions that began beside a hold they exclude: a write while
 * anyone held the lock, a read while a writer did.
 */
export function readersAndWriters(holds: readonly ReadWriteHold[]): {
  maxReaders: number;
  overlaps: number;
} {
  // [time, +1 start / -1 end, write]; at equal times ends go first.
  const events: [number, number, boolean][] = [];
  for (const { acq, rel, write } of holds) {
    events.push(
      [acq, 1, write],
      [Math.max(rel - clockSlackMs, acq + 1e-9), -1, write],
    );
  }
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let readers = 0;
  let writers = 0;
  let maxReaders = 0;
  let overlaps = 0;
  for (const [, delta, write] of events) {
    if (delta > 0 && (write ? readers + writers > 0 : writers > 0))
      overlaps += 1;
    if (write) writers += delta;
    else readers += delta;
    maxReaders = Math.max(maxReaders, readers);
  }
  return { maxReaders, overlaps };
}

/**
 * Merges the processes' events of one read-write lock window (each
 * acquisition with its mode, from `modes`) and computes its figures.
 */
export function analyzeReadWrite(
  parts: readonly ContentionEvents[],
  callers: number,
  startAt: number,
  windowMs: number,
): ReadWriteFigures {
  const end = startAt + windowMs;
  const holds: ReadWriteHold[] = [];
  const readWaits: number[] = [];
  const writeWaits: number[] = [];
  const perCaller = Array.from({ length: callers }, () => 0);
  let longestWait = 0;
  let failures = 0;
  let stragglers = 0;
  let firstError: string | undefined;
  for (const part of parts) {
    const a = part.acquisitions;
    const modes = part.modes ?? [];
    if (modes.length * 4 !== a.length)
      throw new Error(
        `${a.length / 4} acquisitions but ${modes.length} modes in a read-write window`,
      );
    for (let i = 0; i < a.length; i += 4) {
      const [who, wait, acq, rel] = [a[i], a[i + 1], a[i + 2], a[i + 3]];
      const write = modes[i / 4] === 1;
      perCaller[who] += 1;
      holds.push({ acq, rel, write });
      const waited = acq - Math.max(wait, startAt);
      (write ? writeWaits : readWaits).push(waited);
      longestWait = Math.max(longestWait, waited);
    }
    for (let i = 0; i < part.openWaits.length; i += 2) {
      longestWait = Math.max(longestWait, end - part.openWaits[i + 1]);
    }
    failures += part.failures;
    stragglers += part.stragglers;
    firstError ??= part.firstError;
  }
  const readWait = summarize(readWaits);
  const writeWait = summarize(writeWaits);
  const perSec = (n: number) => (n * 1000) / windowMs;
  return {
    acquisitions: holds.length,
    acquisitionsPerSec: perSec(holds.length),
    reads: readWaits.length,
    readsPerSec: perSec(readWaits.length),
    writes: writeWaits.length,
    writesPerSec: perSec(writeWaits.length),
    readWaitP50: readWait.p50,
    readWaitP99: readWait.p99,
    writeWaitP50: writeWait.p50,
    writeWaitP99: writeWait.p99,
    longestWaitMs: longestWait,
    ...fairnessOf(perCaller),
    perCaller,
    ...readersAndWriters(holds),
    failures,
    stragglers,
    firstError,
  };
}
