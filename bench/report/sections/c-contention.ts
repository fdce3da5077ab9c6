import type {
  ContentionResult,
  ContentionRow,
  ContentionVariantResult,
} from '../../scenarios/c-contention.js';
import {
  bounds,
  int,
  ms,
  num,
  pct,
  ratio,
  table,
  withRatio,
} from '../format.js';

/**
 * How many repetitions C's rows are medians of, in words: ours and the raw
 * FIFO hand-off, the rows the targets judge, may have more than the rest.
 */
export function repetitionsOfRows(c: ContentionResult): string {
  const targeted = c.targetedReps ?? c.reps;
  return targeted > c.reps
    ? `${targeted} repetitions of ours and the raw FIFO hand-off, ${c.reps} of the rest`
    : `${c.reps} repetition(s)`;
}

/**
 * The worst window's longest wait: "59.0 ms, at 0.99x the median window's
 * pace; 15 grants ahead, held 38.1 ms, free 20.9 ms (longest gap 6.20 ms)".
 * The pace is that window's acquisitions/s over the row's median: well below
 * 1, a slow stretch of the machine hit the window (every wait in it grew).
 * The split (runs from before have none) says where the wait went: to others'
 * holds (the benchmark's own sleeps included, which a stalled process
 * stretches) or to the lock sitting free between holders (hand-offs).
 */
export function worstWaitText(row: ContentionRow): string {
  const worst = row.windows.find(
    (w) => w.longestWaitMs === row.worstLongestWaitMs,
  );
  let text = `${ms(row.worstLongestWaitMs)} ms`;
  if (!worst) return text;
  if (row.acquisitionsPerSec > 0)
    text += `, at ${ratio(worst.acquisitionsPerSec / row.acquisitionsPerSec)} the median window's pace`;
  const parts = worst.longestWaitParts;
  if (parts)
    text += `; ${parts.grantsAhead} grants ahead, held ${ms(parts.heldMs)} ms, free ${ms(parts.freeMs)} ms (longest gap ${ms(parts.longestFreeMs)} ms)`;
  return text;
}

/** One variant's table: ratios to the raw FIFO hand-off with their bounds, and to the polling raw lock. */
export function contentionTable(variant: ContentionVariantResult): string {
  const fifo = variant.rows.find((x) => x.id === 'raw-fifo');
  const base = fifo ?? variant.rows.find((x) => x.id === 'raw');
  const baseName = fifo ? 'raw FIFO' : 'raw';
  return table(
    [
      'contender',
      'acquisitions/s',
      'x raw FIFO',
      'lower..upper',
      'x raw (polling)',
      `hand-off p50 ms (x ${baseName})`,
      `hand-off p99 ms (x ${baseName})`,
      'longest wait ms (worst)',
      'fairness (worst)',
      'starved (worst)',
      'self',
      'gave up',
      'overlaps',
    ],
    variant.rows.map((row) =>
      row.error && row.windows.length === 0
        ? [row.label, `failed: ${row.error}`, ...Array<string>(11).fill('')]
        : [
            row.label,
            int(row.acquisitionsPerSec),
            ratio(row.ratioToFifo?.median ?? Number.NaN),
            bounds(row.ratioToFifo),
            ratio(row.ratio),
            withRatio(row.handoffP50, base?.handoffP50 ?? NaN, ms),
            withRatio(row.handoffP99, base?.handoffP99 ?? NaN, ms),
            `${ms(row.longestWaitMs)} (${ms(row.worstLongestWaitMs)})`,
            `${num(row.fairness)} (${num(row.worstFairness ?? Number.NaN)})`,
            `${num(row.starved, 0)} (${num(row.worstStarved, 0)})`,
            pct(row.selfHandoffShare),
            int(row.failures),
            int(row.overlaps),
          ],
    ),
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

const unmeasuredWindows = (n: number): string =>
  n === 1 ? 'an unmeasured window' : `${n} unmeasured windows`;

/** "Before its first measured window each contender ran ...": C's unmeasured windows. */
function warmUpSentence(
  c: ContentionResult,
  warmup: NonNullable<ContentionResult['warmup']>,
): string {
  const most = Math.max(...c.variants.map((v) => v.processes));
  const fresh =
    warmup.freshRounds === undefined || warmup.freshRounds === warmup.rounds
      ? undefined
      : `${warmup.freshRounds} in a variant where some of its processes ran for the first time (the first one, and the first with ${most} processes)`;
  if (warmup.acquisitions) {
    const least = fresh
      ? `${warmup.rounds}, or ${fresh};`
      : `${warmup.rounds},`;
    return `Before its first measured window in a variant each contender ran unmeasured windows of ${warmup.windowMs} ms, just before it: at least ${least} then more until each of its processes had made ${int(warmup.acquisitions)} acquisitions in them, up to ${warmup.maxRounds} in all (${warmUpRange(c)}).`;
  }
  const head = `Before its first measured window each contender ran ${unmeasuredWindows(warmup.rounds)} of ${warmup.windowMs} ms in every variant`;
  return fresh ? `${head}, just before that window, and ${fresh}.` : `${head}.`;
}

/** "windows run: 1 process x 16, hold 0 ms: 4; ...": the fewest and most warm-up windows of each variant. */
function warmUpRange(c: ContentionResult): string {
  const ranges = c.variants.map((variant) => {
    const rounds = variant.rows
      .map((row) => row.warmupWindows)
      .filter((n): n is number => n !== undefined);
    if (rounds.length === 0) return `${variant.label}: -`;
    const least = Math.min(...rounds);
    const most = Math.max(...rounds);
    return `${variant.label}: ${least === most ? least : `${least}-${most}`}`;
  });
  return `windows run, fewest-most over the contenders: ${ranges.join('; ')}`;
}

/** C: one key, many contenders; a table per variant, under the chart. */
export function contentionSection(
  c: ContentionResult,
  chartFile: string,
): string[] {
  const out: string[] = [];
  const processes = c.processesPerContender
    ? 'Every contender runs in worker processes of its own (the one-process variants in the first of them), for the reasons given under Method; each'
    : c.ownProcesses
      ? 'The contenders of each library run in worker processes of their own (the one-process variants in the first of them); each'
      : 'In the multi-process variants every';
  const warmUp = c.warmup ? ` ${warmUpSentence(c, c.warmup)}` : '';
  out.push(
    `## C. One key, ${c.contenders} contenders`,
    '',
    `Each window runs ${c.windowMs} ms; per variant ${repetitionsOfRows(c)}.${warmUp} ${processes} worker process has its own instance (its own connections) of the contender. "x raw FIFO" is the median over the repetitions of the ratio to the raw FIFO hand-off's window in the same repetition, with its bounds (see Method); "x raw (polling)" the same to the polling raw lock. "Fairness" is the most acquisitions of one contender over the fewest (∞ when one got none); "self" is the share of acquisitions that went to the contender that had just released; "overlaps" counts acquisitions before the previous holder began releasing (must be 0).`,
    '',
    `![Contention chart](${chartFile})`,
    '',
  );
  for (const variant of c.variants) {
    out.push(`### ${variant.label}`, '', contentionTable(variant), '');
    const judged = variant.rows.filter(
      (row) =>
        ['raw-fifo', 'ours-service', 'ours-decorator'].includes(row.id) &&
        row.windows.some((w) => w.longestWaitParts),
    );
    if (judged.length > 0) {
      out.push(
        "The longest wait of each judged row's worst window, and where it went:",
        '',
        ...judged.map((row) => `- ${row.label}: ${worstWaitText(row)}`),
        '',
      );
    }
    const overlapping = variant.rows.filter((row) => row.overlaps > 0);
    if (overlapping.length > 0) {
      out.push(
        `Overlapping holds (an acquisition before the previous holder began releasing) seen for: ${overlapping.map((row) => `${row.label} (${row.overlaps})`).join(', ')}.`,
        '',
      );
    }
  }
  return out;
}
