import type { SoakResult } from '../../scenarios/g-soak.js';
import { bytes, int, table } from '../format.js';

/** `first -> last` of one figure of the soak. */
const pair = (first: number | undefined, last: number | undefined) =>
  `${first ?? '–'} -> ${last ?? '–'}`;

/** G's figures from the first checkpoint to the last, in a few lines (printed by run.ts). */
export function soakSummary(g: SoakResult): string {
  const first = g.snapshots[0];
  const last = g.snapshots.at(-1);
  if (!first || !last)
    return `G  soak: no checkpoint${g.error ? ` (${g.error})` : ''}`;
  return [
    `G  soak: ${int(g.cycles)} cycles, ${int(g.cyclesPerSec)} cycles/s, ${g.snapshots.length} checkpoints, first -> last:`,
    `   heap ${bytes(first.heapUsedBytes)} -> ${bytes(last.heapUsedBytes)} (${bytes(g.heapGrowthBytes)}, trend ${bytes(g.heapSlopePer100k)} per 100,000 cycles)`,
    `   handles ${pair(first.handles, last.handles)}, listeners ${pair(first.listeners, last.listeners)}, timers ${pair(first.timers, last.timers)}`,
    `   Redis connections ${pair(first.redisConnections, last.redisConnections)}, subscriptions ${pair(first.redisSubscriptions, last.redisSubscriptions)}, keys ${pair(first.redisKeys, last.redisKeys)}`,
    `   ${g.grew.length === 0 ? 'nothing grew' : `GREW: ${g.grew.join(', ')}`}; ${int(g.failures)} failed acquisitions${g.error ? `; failed: ${g.error}` : ''}`,
  ].join('\n');
}

/** G: the soak, a row per checkpoint. */
export function soakSection(g: SoakResult): string[] {
  const out: string[] = [];
  out.push(
    '## G. Soak',
    '',
    `${int(g.cycles)} acquire + release cycles through LockService (module defaults), ${g.loops} loops over ${g.keys} keys (contention on every key), ${int(g.cyclesPerSec)} cycles/s, ${int(g.failures)} failed acquisitions. ` +
      `At each checkpoint the loops pause, a full GC runs${g.gcExposed ? '' : ' (not available in this run: heap figures include garbage)'}, and the process and Redis are read. The first checkpoint is the warm-up baseline.`,
    '',
  );
  if (g.error) out.push(`Failed: ${g.error}`, '');
  const internalNames = [
    ...new Set(g.snapshots.flatMap((s) => Object.keys(s.internals))),
  ];
  out.push(
    table(
      [
        'cycles',
        'heap used',
        'rss',
        'listeners',
        'handles',
        'timers',
        'active resources',
        'Redis conns',
        'Redis subs',
        'Redis keys',
        'Redis memory',
        ...internalNames,
      ],
      g.snapshots.map((s) => [
        int(s.cycles),
        bytes(s.heapUsedBytes),
        bytes(s.rssBytes),
        String(s.listeners),
        s.handles === undefined ? '–' : String(s.handles),
        String(s.timers),
        Object.entries(s.resources)
          .map(([k, n]) => `${k} ${n}`)
          .join(', '),
        String(s.redisConnections),
        String(s.redisSubscriptions),
        String(s.redisKeys),
        bytes(s.redisUsedMemoryBytes),
        ...internalNames.map((n) => String(s.internals[n] ?? '–')),
      ]),
    ),
    '',
    `Heap from the first to the last checkpoint: ${bytes(g.heapGrowthBytes)} (trend ${bytes(g.heapSlopePer100k)} per 100,000 cycles). ` +
      (g.grew.length === 0
        ? 'Nothing grew after warm-up.'
        : `**Grew after warm-up: ${g.grew.join(', ')}.**`),
    '',
  );
  return out;
}
