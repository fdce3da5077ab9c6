import type {
  ReadWriteResult,
  ReadWriteVariantResult,
} from '../../scenarios/j-rwlock.js';
import { bounds, int, ms, num, ratio, table, withRatio } from '../format.js';

/** A wait with its ratio to the raw read-write lock's. */
const wait = (value: number, baseValue: number | undefined) =>
  withRatio(value, baseValue ?? Number.NaN, ms);

/**
 * One variant's table: reads and writes/s with the ratio to the raw
 * read-write lock, reads/s and writes/s, the waits of each mode, fairness,
 * readers at once and the exclusion check.
 */
export function readWriteTable(variant: ReadWriteVariantResult): string {
  const base = variant.rows.find((x) => x.id === 'raw-rwlock');
  return table(
    [
      'contender',
      'ops/s',
      'x raw',
      'lower..upper',
      'reads/s',
      'writes/s',
      'read wait p50 ms (x raw)',
      'read wait p99 ms (x raw)',
      'write wait p50 ms (x raw)',
      'write wait p99 ms (x raw)',
      'longest wait ms (worst)',
      'fairness (worst)',
      'starved (worst)',
      'most readers',
      'writer overlaps',
      'gave up',
    ],
    variant.rows.map((row) =>
      row.error && row.windows.length === 0
        ? [row.label, `failed: ${row.error}`, ...Array<string>(14).fill('')]
        : [
            row.label,
            int(row.acquisitionsPerSec),
            ratio(row.ratio.median),
            bounds(row.ratio),
            int(row.readsPerSec),
            int(row.writesPerSec),
            wait(row.readWaitP50, base?.readWaitP50),
            wait(row.readWaitP99, base?.readWaitP99),
            wait(row.writeWaitP50, base?.writeWaitP50),
            wait(row.writeWaitP99, base?.writeWaitP99),
            `${ms(row.longestWaitMs)} (${ms(row.worstLongestWaitMs)})`,
            `${num(row.fairness)} (${num(row.worstFairness)})`,
            `${num(row.starved, 0)} (${num(row.worstStarved, 0)})`,
            int(row.maxReaders),
            row.overlaps > 0 ? `${int(row.overlaps)} OVERLAPPED` : '0',
            int(row.failures),
          ],
    ),
    ['l', ...Array<'r'>(15).fill('r')],
  );
}

/** J: a readers-heavy mix on one read-write lock; a table per hold. */
export function readWriteSection(j: ReadWriteResult): string[] {
  const reads = Math.round(j.readShare * 100);
  const out: string[] = [
    `## J. Read-write lock: ${j.callers} callers, ${reads}% reads`,
    '',
    `${j.callers} loops over ${j.processes} worker processes (each contender has processes of its own, each with its own instance and connections) take the read lock of one read-write lock with probability ${num(j.readShare)}, else its write lock, hold it, release it and start again; every loop starts at the same moment of the shared clock, and draws its reads and writes from a seed of the repetition, so every contender gets the same mix. Each window runs ${j.windowMs} ms; ${j.reps} repetition(s) per hold. "x raw" is the median over the repetitions of the ratio of reads and writes per second to the raw read-write lock's window in the same repetition (one script per verb, 1 ms polling, no queue; a polling writer sets a short-lived writer-waiting key that keeps new readers out, so it prefers writers as ours does), with its bounds (see Method). "LockService for reads too" is ours with the mutex for every read and write: what sharing the reads buys. A wait runs from asking for the lock to holding it, for reads and writes apart; the longest wait (either mode) includes waits still open when the window closed. "Fairness" is C's: the most acquisitions of one caller over the fewest (∞ when one got none). "Most readers" is the most read holds seen at once, and "writer overlaps" the acquisitions that began beside a hold they exclude (a write beside any hold, a read beside a write), each hold counted from its acquisition to its release beginning on the shared clock (less 50 µs for the processes' clocks), as I counts holders: an overlap is a correctness failure, reported as an error. With a 0 ms hold a hold has no length on that clock, so there both stay near 0 or 1 and check little: the 1 ms hold is the check. J has no targets yet: its figures are for information.`,
    '',
  ];
  for (const variant of j.variants) {
    out.push(`### ${variant.label}`, '', readWriteTable(variant), '');
  }
  return out;
}
