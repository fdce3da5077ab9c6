import type { DeploymentsResult } from '../../scenarios/h-deployments.js';
import { bounds, int, ms, num, ratio, table } from '../format.js';

/** `(1.08x; 1.02–1.15x)`: a ratio with its smallest and largest per-repetition value. */
function ratioWithSpread(
  value: number,
  [lo, hi]: readonly [number, number],
  reps: number,
): string {
  return reps > 1 && Number.isFinite(lo) && Number.isFinite(hi)
    ? `(${ratio(value)}; ${num(lo)}–${ratio(hi)})`
    : `(${ratio(value)})`;
}

/** H's table: one row per deployment, ours beside its raw lock (also printed by run.ts). */
export function deploymentsTable(h: DeploymentsResult): string {
  const rows = h.rows.map((row) => {
    const n = row.ours.slices.length;
    if (row.error && n === 0)
      return [row.label, `failed: ${row.error}`, '', '', '', '', '', '', ''];
    return [
      row.error ? `${row.label} (failed later: ${row.error})` : row.label,
      int(row.ours.cyclesPerSec),
      int(row.raw.cyclesPerSec),
      ratio(row.cyclesRatio),
      bounds(row.cyclesRatioInterval),
      `${ms(row.ours.cycleP50)} ${ratioWithSpread(row.p50Ratio, row.p50RatioRange, n)}`,
      ms(row.raw.cycleP50),
      `${ms(row.ours.cycleP99)} ${ratioWithSpread(row.p99Ratio, row.p99RatioRange, n)}`,
      ms(row.raw.cycleP99),
    ];
  });
  return table(
    [
      'deployment',
      'ours cycles/s',
      'raw cycles/s',
      'x raw',
      'lower..upper',
      'ours cycle p50 ms (x raw)',
      'raw cycle p50 ms',
      'ours cycle p99 ms (x raw)',
      'raw cycle p99 ms',
    ],
    rows,
    ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

/** H: our lock beside a raw one on each deployment. */
export function deploymentsSection(h: DeploymentsResult): string {
  return [
    '## H. Deployments, uncontended cycles',
    '',
    `Sequential acquire + release, one loop rotating over 1,000 keys, of our \`LockService\` at the module defaults (watchdog lease) on each deployment, beside a raw lock on the same deployment: the two are open at once, ${h.turnsAcrossProcesses ? 'each in a worker process of its own,' : 'in one worker process,'} and take turns of ${h.switchMs} ms until each has had ${h.sliceMs} ms (after ${h.warmupMs} ms of warm-up turns), as in A. ${h.reps} repetition(s); each visits the deployments (all running at once) in a rotated order, and on each deployment the raw lock takes the first turn in every other repetition. Each ratio is to the raw lock of the same deployment: cycles/s the median of the per-repetition ratios with its bounds (see Method), latencies the ratio of the medians followed, after the semicolon, by the smallest and largest per-repetition ratio. Informational: H has no target.`,
    '',
    deploymentsTable(h),
    '',
    ...h.rows.map(
      (row) => `- ${row.label}: ours with \`${row.option}\`; ${row.rawDetail}.`,
    ),
    '',
  ].join('\n');
}
