import type { BenchResults } from '../../results.js';
import { table } from '../format.js';
import {
  checkTargets,
  missedTargets,
  type TargetCheck,
  verdict,
} from '../targets.js';

/** The name of the raw data file next to the report. */
export function jsonName(r: Pick<BenchResults, 'mode'>): string {
  void r;
  return 'lock-benchmark.json';
}

/** Whether A and B ran each contender in turns beside the raw baseline, in a worker process (runs from before that did not). */
function tookTurns(r: BenchResults): boolean {
  return (r.A ?? r.B)?.switchMs !== undefined;
}

/** Whether the turns alternated between processes of each contender's own, none with an AsyncLocalStorage enabled by the harness. */
function turnsAcrossProcesses(r: BenchResults): boolean {
  return Boolean(
    (r.A ?? r.B)?.turnsAcrossProcesses ??
    r.H?.turnsAcrossProcesses ??
    r.C?.processesPerContender ??
    r.D?.switchMs,
  );
}

/** How the run placed the baselines beside the contenders (runs from before the separate processes: as they did it). */
function processMethod(r: BenchResults): string[] {
  if (!turnsAcrossProcesses(r)) {
    const sideBySide = tookTurns(r)
      ? "In A and B each contender runs in a worker process together with an instance of the raw baseline, and the two take turns of a few tens of ms until each has had its slice (after unmeasured warm-up turns); a throughput ratio is the median over the repetitions of the ratio within each slice. The machine's slow phases come and go within a second, so only turns this short meet the same conditions. The contenders of each library have worker processes of their own, which keeps one library's calls from shaping V8's optimisation of code that another uses too (ioredis, Node's streams), as JMH forks a JVM per benchmark."
      : 'In A and B the raw baseline also runs a slice right beside each slice of every other contender, before it in one repetition and after it in the next, and a throughput ratio is the median of those side-by-side ratios: slow phases of the machine last seconds, longer than a repetition takes to get from one contender to another.';
    return [
      `- ${sideBySide}`,
      `- The benchmark process${tookTurns(r) || r.C?.ownProcesses ? ' and every worker process it starts use' : ' uses'} an \`AsyncLocalStorage\` from the start, as \`@DistributedLock\` does (it keeps the lock scope there). On Node 20 that makes every promise in the process, any contender's, run a hook; starting with it on keeps the conditions equal for every slice, those of an app that uses the decorator.`,
    ];
  }
  return [
    "- **Processes.** Every contender runs in worker processes of its own (in C as many as the variant has processes), and so does each side of H on each deployment; the benchmark's own process drives them, and itself runs only what compares no timing with a baseline (E's server time, G's soak, B's promise counts). A worker imports only its contender's module, when it opens it: the workers of the raw baselines (`raw`, `raw-quorum`, `raw-fifo`, H's raw locks) never load Nest, reflect-metadata or the library (each checks that it has no reflect-metadata when it opens its baseline), and no process runs with an `AsyncLocalStorage` enabled by the harness. Ours runs as an app runs it: the decorator's rows carry the cost of the `AsyncLocalStorage` the library itself uses for its lock scope (on Node 20 every promise of the process then runs a hook), the `LockService` rows do not. Separate processes also keep one library's calls from shaping V8's optimisation of code that another uses too (ioredis, Node's streams), as JMH forks a JVM per benchmark.",
    "- **Turns.** In A, B, D and H a contender and its baseline take turns across their two processes: both open their instance for the whole repetition, then the parent asks one worker for a turn (its loops cycle for the turn's time, then finish the cycle they are in) and waits for the turn's tally before asking the other, so only one side runs at any moment. Warm-up turns come first and are dropped; the side that takes the first turn alternates from one repetition to the next. The machine's slow phases come and go within a second, so only turns this short meet the same conditions: with whole 500 ms slices side by side, one contender's per-repetition ratios once spread over 0.55-1.69, with 50 ms turns over 0.83-1.15. In A, B and D each contender has a baseline process of its own (the baseline's row gathers them all): on this VM a sequential round trip takes either about 22 µs or about 50 µs depending on where the scheduler keeps the client process, a mode that sticks to the process, and one raw process that took a turn in every group sat in the fast mode while every library's process, the peers' too, sat in the slow one (with every process on one core, `taskset -c 1`, both modes are gone). In A and B the contender a row is compared with in the same turns (the unfenced `LockService` beside the fenced one) also runs beside it in a process of its own, so that every process takes turns in one group only: when the unfenced `LockService` process took turns in three groups, it woke warm while its fenced partner had slept through the eleven other groups, and the fenced row lost 15% of B to that alone (0.77x, against 0.91x with processes of their own).",
    '- **The fenced cycle** (`LockService, fence: true`) takes its turns in a group of three, with the raw baseline and the unfenced `LockService`, each in its own process: its ratio to the unfenced cycle comes from the same turns, per repetition, like the ratios to the raw lock.',
  ];
}

/** How C's raw FIFO hand-off works, for the Method section. */
const cYardstick =
  "- **C's yardstick** is `raw FIFO hand-off`: the FIFO lock with direct hand-off one would write on raw ioredis. One script takes the free key with `SET NX PX` or pushes the token onto `<key>:q`; the holder's release script pops the head of the queue, sets the key to its token (the lock goes straight to it) and publishes the token on `<key>:w`, where each process's one subscriber connection wakes the waiter; a waiter that gives up at the window's end leaves the queue (`LREM`), releasing the lock if it was handed over meanwhile. The polling raw lock stays as a row for reference.";

/** The targets with their median, interval and verdict (also printed by run.ts). */
export function targetsTable(checks: readonly TargetCheck[]): string {
  return table(
    ['scenario', 'target', 'median', 'lower..upper', 'result'],
    checks.map((c) => [
      c.scenario,
      c.target,
      c.measured,
      c.bounds ?? '',
      verdict(c),
    ]),
  );
}

/** The report's opening: title, run, targets, errors, method, machine and contenders. */
export function introSection(r: BenchResults): string[] {
  const out: string[] = [];
  const smoke = r.mode === 'smoke';
  out.push(`# Lock benchmark: ${smoke ? 'SMOKE run' : 'full run'}`, '');
  if (smoke) {
    out.push(
      '> **This is a smoke run**: short slices and a single repetition, meant to keep the',
      '> harness working. Its figures are indicative only; run `npm run bench` (about 18',
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
  const missed = missedTargets(checks);
  const measured = checks.filter((c) => c.met !== undefined && !c.moonshot);
  out.push('## Targets', '');
  if (checks.length === 0) {
    out.push('No target was measured in this run.', '');
  } else {
    out.push(
      (missed.length === 0
        ? 'Every target measured in this run is met'
        : `**${missed.length} of ${measured.length} measured targets are missed** in this run`) +
        ' (a ratio meets its target only when the bound of its interval on the far side does: see Method; a moonshot is shown, never counted).',
      '',
      targetsTable(checks),
      '',
    );
    if (missed.length > 0)
      out.push(
        "What was measured and tried for the targets still short, with the figures and the command behind each, is in the repository's `docs/benchmarks/performance-notes.md`; the README's Benchmarks section sums up the latest full run.",
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
    '- Contenders run one after another in short slices, and every repetition runs each contender once in a rotated order, so the noise of the shared machine reaches all of them alike. Tables show the **median over the repetitions**; `(1.05x)` after a latency is its ratio to the baseline of the same run (the ratio of the medians).',
    ...processMethod(r),
    `- **Ratios and their bounds.** A throughput ratio (and D's p50 ratio) is the median over the repetitions of the ratio within each repetition; \`lower..upper\` is a distribution-free confidence interval for that median: the k-th smallest and the k-th largest of the n per-repetition ratios, with k the largest for which the probability that the true median lies between them, 1 - 2 P(Binomial(n, 1/2) <= k-1), is still at least 90% (35 repetitions: the 13th and 23rd, 91.0%; 23: the 8th and 16th, 90.7%; 21: the 7th and 15th, 92.2%; 15: the 4th and 12th, 96.5%; 13: the 4th and 10th, 90.8%; 11: the 3rd and 9th, 93.5%; 9: the 2nd and 8th, 96%; 5 to 7: the smallest and largest). Below 5 repetitions no interval reaches 90%: the bounds are then the smallest and largest ratio, marked "too few repetitions". **A target on a ratio is met only when its bound on the far side meets it**: the lower bound of an "at least", the upper bound of an "at most". C's fairness and starvation are judged on the worst window, and its longest wait on the 90th-percentile window (nearest rank: the 4th longest of 35 windows): a maximum grows with the number of windows, and a stall of the VM lengthens every wait of the window it hits, the raw FIFO hand-off's too. Beside it stand the worst window's longest wait, that window's pace (its acquisitions/s over the row's median window's: well below 1, a slow stretch of the machine hit the window and every wait in it grew) and where the wait went, and the raw FIFO hand-off's figures in the same variant.`,
    ...(r.C ? [cYardstick] : []),
    `- Every contender takes a lease of ${r.config.ttlMs} ms. Ours runs at the module defaults (watchdog lease) unless the row says otherwise; the peers at their defaults, and in C also with their retry delay tuned down to 10 ms (200 retries, so the wait budget stays at the defaults' 2 s). In A and B nobody ever retries, so the tuned variants are left out there.`,
    '- Latencies are measured with `performance.now()` around each call. In C every loop stamps the moment its release begins and the moment its acquisition resolves on a clock shared by all processes (the monotonic clock of the machine, `process.hrtime()`); a hand-off is the time from a release beginning to the next acquisition, counted only when the next holder is a different contender. An acquisition that gives up (retries exhausted) is retried at once, and its wait runs on from the first attempt; waits still open when the window closes count as waits too.',
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
  return out;
}
