import type {
  SemaphoreResult,
  SemaphoreVariantResult,
} from '../../scenarios/i-semaphore.js';
import { bounds, int, ms, num, ratio, table, withRatio } from '../format.js';

/** One variant's table: throughput with its ratio to the raw ZSET semaphore, waits, fairness, holders at once. */
export function semaphoreTable(
  variant: SemaphoreVariantResult,
  limit: number,
): string {
  const base = variant.rows.find((x) => x.id === 'raw-semaphore');
  return table(
    [
      'contender',
      'acquisitions/s',
      'x raw',
      'lower..upper',
      'wait p50 ms (x raw)',
      'wait p99 ms (x raw)',
      'longest wait ms (worst)',
      'fairness (worst)',
      'starved (worst)',
      `most holders (<= ${limit})`,
      'gave up',
    ],
    variant.rows.map((row) =>
      row.error && row.windows.length === 0
        ? [row.label, `failed: ${row.error}`, ...Array<string>(9).fill('')]
        : [
            row.label,
            int(row.acquisitionsPerSec),
            ratio(row.ratio.median),
            bounds(row.ratio),
            withRatio(row.waitP50, base?.waitP50 ?? Number.NaN, ms),
            withRatio(row.waitP99, base?.waitP99 ?? Number.NaN, ms),
            `${ms(row.longestWaitMs)} (${ms(row.worstLongestWaitMs)})`,
            `${num(row.fairness)} (${num(row.worstFairness)})`,
            `${num(row.starved, 0)} (${num(row.worstStarved, 0)})`,
            `${int(row.maxHolders)}${row.overbooked > 0 ? ` OVERBOOKED x${row.overbooked}` : ''}`,
            int(row.failures),
          ],
    ),
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

/** I: many callers on a few-permit semaphore; a table per hold. */
export function semaphoreSection(i: SemaphoreResult): string[] {
  const out: string[] = [
    `## I. Semaphore: ${i.callers} callers on ${i.limit} permits`,
    '',
    `${i.callers} loops over ${i.processes} worker processes (each contender has processes of its own, each with its own instance and connections) take 1 permit of a ${i.limit}-permit semaphore, hold it, release it and start again; every loop starts at the same moment of the shared clock. Each window runs ${i.windowMs} ms; ${i.reps} repetition(s) per hold. "x raw" is the median over the repetitions of the ratio to the raw ZSET semaphore's window in the same repetition (a sorted set of holders with expiry, one script, 1 ms polling, no queue), with its bounds (see Method). A wait runs from asking for the permit to holding it; the longest wait includes waits still open when the window closed. "Fairness" is C's: the most acquisitions of one caller over the fewest (∞ when one got none). "Most holders" is the most holds seen at once, each counted from its acquisition to its release beginning on the shared clock (less 50 µs for the processes' clocks): above ${i.limit} the semaphore overbooked, a correctness failure reported as an error. With a 0 ms hold a hold has no length on that clock (the release begins as soon as the acquisition resolves), so there the count stays near 1 and checks nothing: the 1 ms hold is the check.`,
    '',
  ];
  for (const variant of i.variants) {
    out.push(`### ${variant.label}`, '', semaphoreTable(variant, i.limit), '');
  }
  return out;
}
