import type { BenchResults } from '../../results.js';
import type { UncontendedResult } from '../../scenarios/uncontended.js';
import { referenceInterval, throughputInterval } from '../../stats.js';
import { bounds, int, ms, num, ratio, table, withRatio } from '../format.js';

/** ", in turns of N ms beside the raw baseline" for runs that took turns. */
function turns(result: UncontendedResult): string {
  if (result.switchMs === undefined) return '';
  return result.turnsAcrossProcesses
    ? `, in turns of ${result.switchMs} ms with the raw baseline, each in its own process`
    : `, in turns of ${result.switchMs} ms beside the raw baseline`;
}

const repetitions = (n: number) => `${n} repetition${n === 1 ? '' : 's'}`;

/**
 * How many repetitions A's or B's rows are medians of, in words: the rows a
 * target judges may have more than the rest (the raw baseline runs beside
 * each of them, so it has as many).
 */
export function repetitionsOfUncontended(result: UncontendedResult): string {
  const targeted = result.targetedReps ?? result.reps;
  return targeted > result.reps
    ? `${repetitions(targeted)} of the rows a target judges and of the raw baseline, ${result.reps} of the rest`
    : repetitions(result.reps);
}

/** Where A's processes ran, when the run says. */
function placement(result: UncontendedResult): string {
  const placed = result.placement;
  if (!placed) return '';
  if ('unplaced' in placed)
    return ` The processes ran wherever the scheduler put them (${placed.unplaced}).`;
  return ` The Redis server ran on CPU ${placed.serverCpus} and every worker process on CPU ${placed.clientCpus} (\`taskset\`), as a Redis host and its clients' hosts would: left to the scheduler, a client process on this VM sometimes shares a CPU with Redis and sometimes not, a placement that sticks to the process for a while and moves a sequential round trip between about 22 and 50 µs, so one contender's per-repetition ratios spread over 0.80-1.29, and placed over 0.90-1.05. \`BENCH_PLACE=0\` leaves A to the scheduler; B always is (each of its sides keeps a CPU busy).`;
}

/** The Node side of the uncontended gap, from B's promise counts and CPU times. */
function nodeSide(r: BenchResults): string {
  const rows = r.B?.rows ?? [];
  const raw = rows.find((x) => x.id === 'raw');
  const service = rows.find((x) => x.id === 'ours-service');
  const decorator = rows.find((x) => x.id === 'ours-decorator');
  if (
    raw?.promisesPerCycle === undefined ||
    service?.promisesPerCycle === undefined ||
    decorator?.promisesPerCycle === undefined
  )
    return '';
  const cpu = (row: typeof raw) =>
    ratio(row.nodeCpuUsPerCycle / raw.nodeCpuUsPerCycle);
  return ` The rest is Node's work (B's last two columns): a cycle creates ${num(service.promisesPerCycle, 0)} promises through \`LockService\` and ${num(decorator.promisesPerCycle, 0)} through the decorator, against ${num(raw.promisesPerCycle, 0)} for the raw lock, and in the decorator's process, where the library keeps its lock scope in an \`AsyncLocalStorage\`, each one also calls a hook (see Method); the process's CPU time per B cycle was ${cpu(service)} and ${cpu(decorator)} of the raw lock's.`;
}

/** A line for each row compared with another contender in the same turns (the fenced cycle). */
export function comparedRows(result: UncontendedResult): string[] {
  const lines: string[] = [];
  for (const row of result.rows) {
    const interval = referenceInterval(row);
    const reference = result.rows.find((r) => r.id === row.comparedWith);
    if (!interval || !reference) continue;
    lines.push(
      `"${row.label}" against "${reference.label}" in the same turns: ${ratio(interval.median)} (${bounds(interval)}).`,
      '',
    );
  }
  return lines;
}

function uncontendedSection(
  result: UncontendedResult,
  title: string,
  intro: string,
): string {
  const base = result.rows.find((r) => r.id === 'raw');
  const b = (pick: (r: NonNullable<typeof base>) => number) =>
    base ? pick(base) : Number.NaN;
  const rows = result.rows.map((r) => {
    const interval = throughputInterval(r, base);
    const rate = r.error
      ? [`failed: ${r.error}`, '', '']
      : [int(r.cyclesPerSec), ratio(interval.median), bounds(interval)];
    if (result.scenario === 'A') {
      return [
        r.label,
        ...rate,
        withRatio(
          r.acquireP50,
          b((x) => x.acquireP50),
          ms,
        ),
        withRatio(
          r.acquireP99,
          b((x) => x.acquireP99),
          ms,
        ),
        withRatio(
          r.releaseP50,
          b((x) => x.releaseP50),
          ms,
        ),
        withRatio(
          r.releaseP99,
          b((x) => x.releaseP99),
          ms,
        ),
      ];
    }
    return [
      r.label,
      ...rate,
      withRatio(
        r.cycleP50,
        b((x) => x.cycleP50),
        ms,
      ),
      withRatio(
        r.cycleP99,
        b((x) => x.cycleP99),
        ms,
      ),
      withRatio(
        r.nodeCpuUsPerCycle ?? Number.NaN,
        b((x) => x.nodeCpuUsPerCycle ?? Number.NaN),
        (v) => num(v, 1),
      ),
      r.promisesPerCycle === undefined ? '-' : num(r.promisesPerCycle, 1),
    ];
  });
  const header =
    result.scenario === 'A'
      ? [
          'contender',
          'cycles/s',
          'x raw',
          'lower..upper',
          'acquire p50 ms',
          'acquire p99 ms',
          'release p50 ms',
          'release p99 ms',
        ]
      : [
          'contender',
          'cycles/s',
          'x raw',
          'lower..upper',
          'cycle p50 ms',
          'cycle p99 ms',
          'Node CPU µs/cycle',
          'promises/cycle',
        ];
  return [
    `## ${title}`,
    '',
    intro,
    '',
    table(header, rows, ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']),
    '',
    ...comparedRows(result),
  ].join('\n');
}

/**
 * What the fenced acquisition's script alone makes of A's fenced cycle: Redis's
 * extra time on it (E, means) added to every cycle of the unfenced
 * `LockService` (1 / its cycles/s), as in A each cycle waits for it.
 */
function fencedScriptShare(r: BenchResults): string {
  const rows = r.E?.serverTime?.rows ?? [];
  const meanUs = (verb: string) =>
    rows.find((row) => row.verb === verb)?.meanUs;
  const script = meanUs('ours: fenced acquire script');
  const set = meanUs('ours: SET NX PX');
  const unfenced = r.A?.rows.find((row) => row.id === 'ours-service');
  if (script === undefined || set === undefined || !unfenced?.cyclesPerSec)
    return '';
  const extraUs = script - set;
  const cycleUs = 1e6 / unfenced.cyclesPerSec;
  return ` Redis spends ${num(extraUs, 1)} µs more on that script than on the \`SET\` (E, means); added to each of A's unfenced cycles (${num(cycleUs, 1)} µs at its median pace) it alone makes the fenced cycle about ${ratio(cycleUs / (cycleUs + extraUs))} of the unfenced one.`;
}

/** A and B, with the server-time paragraph between them when E measured it. */
export function uncontendedSections(r: BenchResults): string[] {
  const out: string[] = [];
  if (r.A) {
    out.push(
      uncontendedSection(
        r.A,
        'A. One client, sequential cycles',
        `One loop acquires and releases, one lock at a time, rotating over 1,000 keys. A repetition gives each contender ${r.A.sliceMs} ms${turns(r.A)}; ${repetitionsOfUncontended(r.A)}.${placement(r.A)}`,
      ),
    );
  }
  const serverTime = r.E?.serverTime;
  if ((r.A || r.B) && serverTime) {
    out.push(
      `Where the uncontended gap comes from: Redis itself spends ${num(serverTime.oursCycleUs, 1)} µs on one of our cycles against ${num(serverTime.rawCycleUs, 1)} µs on a raw one (E, server time per verb). Both acquire with a bare \`SET NX PX\` when the key is free; our compare-and-delete also checks that nobody queues for the key (and leaves it to the script that serves the queue if someone does). In A that time adds to every round trip, in B it shares the two cores with the clients.${nodeSide(r)} The row "ours: LockService, fence: true" also takes a fencing token in every hold: the acquisition is then a script (acquire-fenced.lua, E: "fenced acquire script") instead of a bare \`SET\`, in the same round trip; the raw lock cannot offer a token at all.${fencedScriptShare(r)}`,
      '',
    );
  }
  if (r.B) {
    out.push(
      uncontendedSection(
        r.B,
        `B. ${r.B.loops} concurrent loops, distinct keys`,
        `${r.B.loops} loops on one client (one instance of each contender), each loop on its own key; a cycle is acquire + release. A repetition gives each contender ${r.B.sliceMs} ms${turns(r.B)}; ${repetitionsOfUncontended(r.B)}. "Node CPU" is the CPU time of the process that ran the contender (user + system, so it includes the socket calls) per cycle over its measured time; "promises/cycle" counts the promises the process creates per cycle, by an async hook over 1,000 sequential cycles after the slices. With two cores shared by Node and Redis, Node's work per cycle is what bounds B.`,
      ),
    );
  }
  return out;
}
