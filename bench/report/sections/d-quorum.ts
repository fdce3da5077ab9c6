import type { QuorumResult, QuorumSize } from '../../scenarios/d-quorum.js';
import { bounds, int, ms, ratio, table, withRatio } from '../format.js';

/** One size's table: cycle p50 over the raw quorum baseline's, with its bounds. */
export function quorumTable(size: QuorumSize): string {
  const base = size.rows.find((x) => x.id === 'raw-quorum');
  return table(
    [
      'contender',
      'cycles/s',
      'cycle p50 ms',
      'x raw quorum',
      'lower..upper',
      'cycle p99 ms (x raw quorum)',
    ],
    size.rows.map((row) =>
      row.error
        ? [row.label, `failed: ${row.error}`, '', '', '', '']
        : [
            row.label,
            int(row.cyclesPerSec),
            ms(row.cycleP50),
            ratio(row.p50Ratio),
            bounds(row.p50RatioInterval),
            withRatio(row.cycleP99, base?.cycleP99 ?? NaN, ms),
          ],
    ),
    ['l', 'r', 'r', 'r', 'r', 'r'],
  );
}

/** D: quorum mode, a table per number of nodes. */
export function quorumSection(d: QuorumResult): string[] {
  const out: string[] = [];
  const turns =
    d.switchMs === undefined
      ? ''
      : `, each contender in turns of ${d.switchMs} ms with the raw quorum baseline (each in its own process${d.baselineBesideEach ? ', the baseline in one beside each contender, as in A and B' : ''}); "x raw quorum" is the median of the per-repetition ratios of the p50s, with its bounds (see Method)`;
  out.push(
    '## D. Quorum mode, uncontended cycles',
    '',
    `Sequential acquire + release, one loop, over ${d.sizes.map((s) => s.nodes).join(' and ')} private servers; ${d.reps} repetitions of ${d.sliceMs} ms${turns}.`,
    '',
  );
  for (const size of d.sizes) {
    out.push(`### ${size.nodes} nodes`, '', quorumTable(size), '');
  }
  return out;
}
