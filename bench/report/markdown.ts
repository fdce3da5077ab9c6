import type { BenchResults } from '../results.js';
import type { DeploymentsResult } from '../scenarios/h-deployments.js';
import type { UncontendedResult } from '../scenarios/uncontended.js';
import {
  pendingMessage,
  flashSaleLoadTool,
} from '../scenarios/f-flash-sale.js';
import { throughputRatio } from '../stats.js';
import { bytes, int, ms, num, pct, ratio, table } from './format.js';
import { checkTargets, verdict } from './targets.js';

/** `value (ratio to base)`, the report's cell for a figure with its baseline. */
function withRatio(
  value: number,
  base: number,
  format: (v: number) => string,
): string {
  if (Number.isNaN(value)) return format(value);
  return `${format(value)} (${ratio(value / base)})`;
}

/** Whether A and B ran each contender in turns beside the raw baseline, in a worker process (runs from before that did not). */
function tookTurns(r: BenchResults): boolean {
  return (r.A ?? r.B)?.switchMs !== undefined;
}

/** How A and B placed the raw baseline beside each contender, as the run did it. */
function sideBySideMethod(r: BenchResults): string {
  if (!tookTurns(r)) {
    return 'In A and B the raw baseline also runs a slice right beside each slice of every other contender, before it in one repetition and after it in the next, and a throughput ratio is the median of those side-by-side ratios: slow phases of the machine last seconds, longer than a repetition takes to get from one contender to another.';
  }
  return "In A and B each contender runs in a worker process together with an instance of the raw baseline, and the two take turns of a few tens of ms until each has had its slice (after unmeasured warm-up turns); a throughput ratio is the median over the repetitions of the ratio within each slice. The machine's slow phases come and go within a second, so only turns this short meet the same conditions. The contenders of each library have worker processes of their own, which keeps one library's calls from shaping V8's optimisation of code that another uses too (ioredis, Node's streams), as JMH forks a JVM per benchmark.";
}

/** ", in turns of N ms beside the raw baseline" for runs that took turns. */
function turns(result: UncontendedResult): string {
  return result.switchMs === undefined
    ? ''
    : `, in turns of ${result.switchMs} ms beside the raw baseline`;
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
  return ` The rest is Node's work (B's last two columns): a cycle creates ${num(service.promisesPerCycle, 0)} promises through \`LockService\` and ${num(decorator.promisesPerCycle, 0)} through the decorator, against ${num(raw.promisesPerCycle, 0)} for the raw lock, and with an \`AsyncLocalStorage\` in use (see Method) each one calls a hook; the process's CPU time per B cycle was ${cpu(service)} and ${cpu(decorator)} of the raw lock's.`;
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
    const rate = r.error
      ? `failed: ${r.error}`
      : `${int(r.cyclesPerSec)} (${ratio(throughputRatio(r, base))})`;
    if (result.scenario === 'A') {
      return [
        r.label,
        rate,
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
      rate,
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
          'cycles/s (x raw)',
          'acquire p50 ms',
          'acquire p99 ms',
          'release p50 ms',
          'release p99 ms',
        ]
      : [
          'contender',
          'cycles/s (x raw)',
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
    table(header, rows, ['l', 'r', 'r', 'r', 'r', 'r', 'r']),
    '',
  ].join('\n');
}

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
      return [row.label, `failed: ${row.error}`, '', '', '', ''];
    return [
      row.error ? `${row.label} (failed later: ${row.error})` : row.label,
      `${int(row.ours.cyclesPerSec)} ${ratioWithSpread(row.cyclesRatio, row.cyclesRatioRange, n)}`,
      `${ms(row.ours.cycleP50)} ${ratioWithSpread(row.p50Ratio, row.p50RatioRange, n)}`,
      ms(row.raw.cycleP50),
      `${ms(row.ours.cycleP99)} ${ratioWithSpread(row.p99Ratio, row.p99RatioRange, n)}`,
      ms(row.raw.cycleP99),
    ];
  });
  return table(
    [
      'deployment',
      'ours cycles/s (x raw)',
      'ours cycle p50 ms (x raw)',
      'raw cycle p50 ms',
      'ours cycle p99 ms (x raw)',
      'raw cycle p99 ms',
    ],
    rows,
    ['l', 'r', 'r', 'r', 'r', 'r'],
  );
}

function deploymentsSection(h: DeploymentsResult): string {
  return [
    '## H. Deployments, uncontended cycles',
    '',
    `Sequential acquire + release, one loop rotating over 1,000 keys, of our \`LockService\` at the module defaults (watchdog lease) on each deployment, beside a raw lock on the same deployment: the two are open at once in one worker process and take turns of ${h.switchMs} ms until each has had ${h.sliceMs} ms (after ${h.warmupMs} ms of warm-up turns), as in A. ${h.reps} repetition(s); each visits the deployments (all running at once) in a rotated order, and on each deployment the raw lock takes the first turn in every other repetition. Each ratio is to the raw lock of the same deployment: cycles/s the median of the per-repetition ratios, latencies the ratio of the medians; after the semicolon, the smallest and largest per-repetition ratio. Informational: H has no target.`,
    '',
    deploymentsTable(h),
    '',
    ...h.rows.map(
      (row) =>
        `- ${row.label}: ours with \`${row.option}\`; ${row.rawDetail}; raw ${int(row.raw.cyclesPerSec)} cycles/s.`,
    ),
    '',
  ].join('\n');
}

export function renderMarkdown(r: BenchResults, chartFile: string): string {
  const out: string[] = [];
  const smoke = r.mode === 'smoke';
  out.push(`# Lock benchmark: ${smoke ? 'SMOKE run' : 'full run'}`, '');
  if (smoke) {
    out.push(
      '> **This is a smoke run**: short slices and a single repetition, meant to keep the',
      '> harness working. Its figures are indicative only; run `npm run bench` (about 12',
      '> minutes on a quiet machine) for the full report.',
      '',
    );
  }
  out.push(
    `Generated by \`${r.command}\` on ${r.startedAt} in ${Math.round(r.durationSec)} s. ` +
      `Scenarios: ${r.scenarios.join(', ')}. Raw data: [\`${jsonName(r)}\`](${jsonName(r)}).`,
    '',
    `Load average (1/5/15 min) on the ${r.machine.cores} cores: ${r.machine.loadAtStart.map((x) => x.toFixed(2)).join(' / ')} at the start, ` +
      `${r.machine.loadAtEnd.map((x) => x.toFixed(2)).join(' / ')} at the end (the end includes the benchmark's own processes). ` +
      (r.machine.loadAtStart[0] > r.machine.cores / 2
        ? '**Other work was competing for the CPU when this run started**: absolute figures are low and noisy; the ratios, taken from interleaved slices, are the figures to read.'
        : 'The machine was quiet when the run started; absolute figures still move from run to run on this shared 2-core machine, so read the ratios.'),
    '',
  );

  const checks = checkTargets(r);
  const missed = checks.filter((c) => c.met === false);
  out.push('## Targets', '');
  if (checks.length === 0) {
    out.push('No target was measured in this run.', '');
  } else {
    out.push(
      missed.length === 0
        ? 'Every target measured in this run is met.'
        : `**${missed.length} of ${checks.filter((c) => c.met !== undefined).length} measured targets are missed** in this run:`,
      '',
      table(
        ['scenario', 'target', 'measured', 'result'],
        checks.map((c) => [c.scenario, c.target, c.measured, verdict(c)]),
      ),
      '',
    );
  }
  if (r.errors.length > 0) {
    out.push('## Errors in this run', '', ...r.errors.map((e) => `- ${e}`), '');
  }

  out.push(
    '## Method',
    '',
    '- Every Redis server is a private `redis-server` started by the benchmark on a free loopback port, without persistence, and stopped at the end. The database is flushed between slices.',
    '- Contenders run one after another in short slices, and every repetition runs each contender once in a rotated order, so the noise of the shared machine reaches all of them alike. Tables show the **median over the repetitions**; `(1.05x)` after a figure is its ratio to the raw baseline of the same run (throughput: the median of the per-repetition ratios; latencies: the ratio of the medians).' +
      ' ' +
      sideBySideMethod(r),
    `- Every contender takes a lease of ${r.config.ttlMs} ms. Ours runs at the module defaults (watchdog lease) unless the row says otherwise; the peers at their defaults, and in C also with their retry delay tuned down to 10 ms (200 retries, so the wait budget stays at the defaults' 2 s). In A and B nobody ever retries, so the tuned variants are left out there.`,
    `- The benchmark process${tookTurns(r) || r.C?.ownProcesses ? ' and every worker process it starts use' : ' uses'} an \`AsyncLocalStorage\` from the start, as \`@DistributedLock\` does (it keeps the lock scope there). On Node 20 that makes every promise in the process, any contender's, run a hook; starting with it on keeps the conditions equal for every slice, those of an app that uses the decorator.`,
    '- Latencies are measured with `performance.now()` around each call. In C every loop stamps the moment its release begins and the moment its acquisition resolves on a clock shared by all processes (`performance.timeOrigin + performance.now()`); a hand-off is the time from a release beginning to the next acquisition, counted only when the next holder is a different contender. An acquisition that gives up (retries exhausted) is retried at once, and its wait runs on from the first attempt; waits still open when the window closes count as waits too.',
    '',
    '## Machine and versions',
    '',
    table(
      ['', ''],
      [
        ['CPU', `${r.machine.cpu} (${r.machine.cores} cores)`],
        ['memory', `${r.machine.memoryGiB.toFixed(0)} GiB`],
        ['OS', r.machine.os],
        ['Node.js', r.machine.node],
        ['Redis', r.machine.redis],
        ...Object.entries(r.versions).map(([name, version]) => [name, version]),
      ],
    ),
    '',
    table(
      ['contender', 'what it is'],
      r.contenders.map((c) => [c.label, c.detail]),
    ),
    '',
  );

  if (r.A) {
    out.push(
      uncontendedSection(
        r.A,
        'A. One client, sequential cycles',
        `One loop acquires and releases, one lock at a time, rotating over 1,000 keys. ${r.A.reps} repetitions of ${r.A.sliceMs} ms per contender${turns(r.A)}.`,
      ),
    );
  }
  const serverTime = r.E?.serverTime;
  if ((r.A || r.B) && serverTime) {
    out.push(
      `Where the uncontended gap comes from: Redis itself spends ${num(serverTime.oursCycleUs, 1)} µs on one of our cycles against ${num(serverTime.rawCycleUs, 1)} µs on a raw one (E, server time per verb). Both acquire with a bare \`SET NX PX\` when the key is free; our compare-and-delete also checks that nobody queues for the key (and leaves it to the script that serves the queue if someone does). In A that time adds to every round trip, in B it shares the two cores with the clients.${nodeSide(r)} The row "ours: LockService + fence()" also asks for a fencing token in every hold, one more round trip and script (E), which the raw lock cannot offer at all.`,
      '',
    );
  }
  if (r.B) {
    out.push(
      uncontendedSection(
        r.B,
        `B. ${r.B.loops} concurrent loops, distinct keys`,
        `${r.B.loops} loops on one client (one instance of each contender), each loop on its own key; a cycle is acquire + release. ${r.B.reps} repetitions of ${r.B.sliceMs} ms${turns(r.B)}. "Node CPU" is the CPU time of the process that ran the contender (user + system, so it includes the socket calls) per cycle over its measured time; "promises/cycle" counts the promises the process creates per cycle, by an async hook over 1,000 sequential cycles after the slices. With two cores shared by Node and Redis, Node's work per cycle is what bounds B.`,
      ),
    );
  }
  if (r.C) {
    out.push(
      `## C. One key, ${r.C.contenders} contenders`,
      '',
      `Each window runs ${r.C.windowMs} ms; ${r.C.reps} repetition(s) per variant. ${r.C.ownProcesses ? 'The contenders of each library run in worker processes of their own (the one-process variants in the first of them), for the reason given for A and B under Method; each' : 'In the multi-process variants every'} worker process has its own instance (its own connections) of the contender. "Fairness" is the most acquisitions of one contender over the fewest (∞ when one got none); "self" is the share of acquisitions that went to the contender that had just released.`,
      '',
      `![Contention chart](${chartFile})`,
      '',
    );
    for (const variant of r.C.variants) {
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
  }
  if (r.D) {
    out.push(
      '## D. Quorum mode, uncontended cycles',
      '',
      `Sequential acquire + release, one loop, over ${r.D.sizes.map((s) => s.nodes).join(' and ')} private servers; ${r.D.reps} repetitions of ${r.D.sliceMs} ms.`,
      '',
    );
    for (const size of r.D.sizes) {
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
  }
  if (r.E) {
    out.push(
      '## E. The server’s own ceiling',
      '',
      `\`redis-benchmark\` against the same private server, ${int(r.E.requests)} requests per row, random keys.`,
      '',
    );
    if (r.E.error) out.push(`Failed: ${r.E.error}`, '');
    out.push(
      table(
        ['command', 'connections', 'requests/s', 'p50 ms'],
        r.E.rows.map((row) => [
          row.command,
          String(row.clients),
          int(row.requestsPerSec),
          ms(row.p50Ms),
        ]),
        ['l', 'r', 'r', 'r'],
      ),
      '',
      `A lock cycle of one SET and one EVALSHA on one connection can reach at most about **${int(r.E.twoTripCycleCeiling)} cycles/s** here (1 / (1/SET + 1/EVALSHA) at one connection).`,
      '',
    );
    const st = r.E.serverTime;
    if (st) {
      out.push(
        '### Server time per verb',
        '',
        `What each top-level command costs Redis itself, from \`SLOWLOG\` at threshold 0 over ${int(st.cycles)} uncontended cycles of each lock on warm keys (commands run inside a script are part of its figure). Ours takes a free key with the same bare \`SET NX PX\`; its release also checks the wait queue (a queue is served by a second script, not run here), and its fence script, run on every second cycle here, issues a fencing token to a holder that asks. The raw baseline has neither.`,
        '',
        table(
          ['command', 'calls', 'mean µs', 'p50 µs'],
          st.rows.map((row) => [
            row.verb,
            int(row.calls),
            num(row.meanUs, 1),
            num(row.p50Us, 0),
          ]),
          ['l', 'r', 'r', 'r'],
        ),
        '',
        `Server time per cycle: raw ${num(st.rawCycleUs, 1)} µs, ours ${num(st.oursCycleUs, 1)} µs (+${num(st.oursCycleUs - st.rawCycleUs, 1)} µs).`,
        '',
      );
    }
  }
  if (r.F) {
    out.push('## F. Flash-sale app, 3 instances', '');
    const f = r.F;
    if (f.status === 'pending') {
      out.push(
        `${pendingMessage}. F runs once \`${flashSaleLoadTool}\` exists and exports \`runLoadTest(options)\` (the contract F relies on is in \`bench/scenarios/f-flash-sale.ts\`).`,
        '',
      );
    } else if (f.status === 'skipped' || f.status === 'failed') {
      out.push(`${f.status === 'failed' ? 'Failed: ' : ''}${f.message}`, '');
    } else {
      const o = f.options!;
      out.push(
        `The app's load tool (\`${flashSaleLoadTool}\`) starts ${o.instances} app instances (separate processes) on one private Redis and one database, and sells a coupon of ${int(o.couponStock)} units to ${int(o.users)} users with ${int(o.requests)} requests, ${o.concurrency} in flight. Each mode ran ${f.runs!.length / 2} time(s), alternating; medians. "Script alone" is the same sale with \`SECKILL_LOCK=off\`: the atomic Redis script still guards the stock.`,
        '',
        table(
          ['mode', 'requests/s (x script alone)', 'p50 ms', 'p99 ms'],
          [
            [
              'per-coupon lock',
              withRatio(
                f.lockRequestsPerSec ?? NaN,
                f.scriptOnlyRequestsPerSec ?? NaN,
                int,
              ),
              withRatio(f.lockP50Ms ?? NaN, f.scriptOnlyP50Ms ?? NaN, ms),
              withRatio(f.lockP99Ms ?? NaN, f.scriptOnlyP99Ms ?? NaN, ms),
            ],
            [
              'script alone',
              int(f.scriptOnlyRequestsPerSec ?? NaN),
              ms(f.scriptOnlyP50Ms ?? NaN),
              ms(f.scriptOnlyP99Ms ?? NaN),
            ],
          ],
          ['l', 'r', 'r', 'r'],
        ),
        '',
        table(
          [
            'run',
            'mode',
            'requests/s',
            'p99 ms',
            'answers',
            'errors',
            'invariants',
          ],
          f.runs!.map((run, i) => [
            String(i + 1),
            run.lock ? 'per-coupon lock' : 'script alone',
            int(run.requestsPerSec),
            ms(run.p99Ms),
            Object.entries(run.statuses)
              .map(([status, n]) => `${status}: ${n}`)
              .join(', '),
            int(run.errors),
            run.invariantsHeld ? 'held' : '**BROKEN**',
          ]),
          ['r', 'l', 'r', 'r', 'l', 'r', 'l'],
        ),
        '',
      );
    }
  }
  if (r.G) {
    const g = r.G;
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
  }
  if (r.H) out.push(deploymentsSection(r.H));
  return `${out.join('\n').trimEnd()}\n`;
}

export function jsonName(r: Pick<BenchResults, 'mode'>): string {
  void r;
  return 'lock-benchmark.json';
}
