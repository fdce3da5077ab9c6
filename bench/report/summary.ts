import type { BenchResults } from '../results.js';
import { throughputInterval } from '../stats.js';
import { bounds, int, ratio, table } from './format.js';
import { contentionTable, repetitionsOfRows } from './sections/c-contention.js';
import { quorumTable } from './sections/d-quorum.js';
import { soakSummary } from './sections/g-soak.js';
import { deploymentsTable } from './sections/h-deployments.js';
import { semaphoreTable } from './sections/i-semaphore.js';
import { readWriteTable } from './sections/j-rwlock.js';
import { targetsTable } from './sections/intro.js';
import {
  comparedRows,
  repetitionsOfUncontended,
} from './sections/uncontended.js';
import { checkTargets } from './targets.js';

/** A and B in short: each contender's cycles/s and its ratio to the raw baseline with the bounds. */
function uncontendedRatios(r: BenchResults, scenario: 'A' | 'B'): string[] {
  const result = r[scenario];
  if (!result) return [];
  const base = result.rows.find((row) => row.id === 'raw');
  return [
    `${scenario}  ${scenario === 'A' ? 'one loop, sequential cycles' : `${result.loops} concurrent loops, distinct keys`} (${repetitionsOfUncontended(result)}):`,
    table(
      ['contender', 'cycles/s', 'x raw', 'lower..upper'],
      result.rows.map((row) => {
        if (row.error && row.slices.length === 0)
          return [row.label, `failed: ${row.error}`, '', ''];
        const interval = throughputInterval(row, base);
        return [
          row.label,
          int(row.cyclesPerSec),
          ratio(interval.median),
          bounds(interval),
        ];
      }),
      ['l', 'r', 'r', 'r'],
    ),
    ...comparedRows(result).filter(Boolean),
    '',
  ];
}

/**
 * What `npm run bench` prints at the end: every scenario's ratios with their
 * bounds, then the targets with their verdicts (the report has the rest).
 */
export function consoleSummary(r: BenchResults): string {
  const out: string[] = [
    ...uncontendedRatios(r, 'A'),
    ...uncontendedRatios(r, 'B'),
  ];
  for (const variant of r.C?.variants ?? []) {
    out.push(
      `C  ${variant.label} (${repetitionsOfRows(r.C!)}):`,
      contentionTable(variant),
      '',
    );
  }
  for (const size of r.D?.sizes ?? []) {
    out.push(
      `D  quorum mode, ${size.nodes} nodes (${r.D!.reps} repetition(s)):`,
      quorumTable(size),
      '',
    );
  }
  if (r.G) out.push(soakSummary(r.G), '');
  if (r.H) {
    out.push(
      `H  deployments, ours / raw on each (${r.H.reps} repetition(s); informational):`,
      deploymentsTable(r.H),
      '',
    );
  }
  for (const variant of r.I?.variants ?? []) {
    out.push(
      `I  semaphore, ${r.I!.callers} callers on ${r.I!.limit} permits: ${variant.label} (${r.I!.reps} repetition(s)):`,
      semaphoreTable(variant, r.I!.limit),
      '',
    );
  }
  for (const variant of r.J?.variants ?? []) {
    out.push(
      `J  read-write lock, ${r.J!.callers} callers: ${variant.label} (${r.J!.reps} repetition(s); figures only, no targets yet):`,
      readWriteTable(variant),
      '',
    );
  }
  const checks = checkTargets(r);
  if (checks.length > 0) out.push('Targets:', targetsTable(checks), '');
  return out.join('\n');
}
