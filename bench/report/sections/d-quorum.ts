import type { QuorumResult } from '../../scenarios/d-quorum.js';
import { int, ms, ratio, table, withRatio } from '../format.js';

/** D: quorum mode, a table per number of nodes. */
export function quorumSection(d: QuorumResult): string[] {
  const out: string[] = [];
  out.push(
    '## D. Quorum mode, uncontended cycles',
    '',
    `Sequential acquire + release, one loop, over ${d.sizes.map((s) => s.nodes).join(' and ')} private servers; ${d.reps} repetitions of ${d.sliceMs} ms.`,
    '',
  );
  for (const size of d.sizes) {
    const base = size.rows.find((x) => x.id === 'raw-quorum');
    out.push(
      `### ${size.nodes} nodes`,
      '',
      table(
        [
          'contender',
          'cycles/s',
          'cycle p50 ms (x raw quorum)',
          'cycle p99 ms (x raw quorum)',
        ],
        size.rows.map((row) =>
          row.error
            ? [row.label, `failed: ${row.error}`, '', '']
            : [
                row.label,
                int(row.cyclesPerSec),
                `${ms(row.cycleP50)} (${ratio(row.p50Ratio)})`,
                withRatio(row.cycleP99, base?.cycleP99 ?? NaN, ms),
              ],
        ),
        ['l', 'r', 'r', 'r'],
      ),
      '',
    );
  }
  return out;
}
