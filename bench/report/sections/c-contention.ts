import type { ContentionResult } from '../../scenarios/c-contention.js';
import { int, ms, num, pct, ratio, table, withRatio } from '../format.js';

/** C: one key, many contenders; a table per variant, under the chart. */
export function contentionSection(
  c: ContentionResult,
  chartFile: string,
): string[] {
  const out: string[] = [];
  out.push(
    `## C. One key, ${c.contenders} contenders`,
    '',
    `Each window runs ${c.windowMs} ms; ${c.reps} repetition(s) per variant. ${c.ownProcesses ? 'The contenders of each library run in worker processes of their own (the one-process variants in the first of them), for the reason given for A and B under Method; each' : 'In the multi-process variants every'} worker process has its own instance (its own connections) of the contender. "Fairness" is the most acquisitions of one contender over the fewest (∞ when one got none); "self" is the share of acquisitions that went to the contender that had just released.`,
    '',
    `![Contention chart](${chartFile})`,
    '',
  );
  for (const variant of c.variants) {
    const base = variant.rows.find((x) => x.id === 'raw');
    out.push(
      `### ${variant.label}`,
      '',
      table(
        [
          'contender',
          'acquisitions/s (x raw)',
          'hand-off p50 ms',
          'hand-off p99 ms',
          'longest wait ms (worst)',
          'fairness',
          'starved (worst)',
          'self',
          'gave up',
        ],
        variant.rows.map((row) =>
          row.error && row.windows.length === 0
            ? [row.label, `failed: ${row.error}`, '', '', '', '', '', '', '']
            : [
                row.label,
                `${int(row.acquisitionsPerSec)} (${ratio(row.ratio)})`,
                withRatio(row.handoffP50, base?.handoffP50 ?? NaN, ms),
                withRatio(row.handoffP99, base?.handoffP99 ?? NaN, ms),
                `${ms(row.longestWaitMs)} (${ms(row.worstLongestWaitMs)})`,
                num(row.fairness),
                `${num(row.starved, 0)} (${num(row.worstStarved, 0)})`,
                pct(row.selfHandoffShare),
                int(row.failures),
              ],
        ),
        ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      ),
      '',
    );
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
