import type { BenchResults } from '../results.js';
import { heapToleranceBytes } from '../scenarios/g-soak.js';
import { throughputRatio } from '../stats.js';
import { bytes, ms, num, ratio } from './format.js';

export interface TargetCheck {
  readonly scenario: string;
  readonly target: string;
  readonly measured: string;
  /** true met, false missed, undefined not measurable in this run. */
  readonly met?: boolean;
}

/** The targets, checked against this run's figures. */
export function checkTargets(r: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const scenario of ['A', 'B'] as const) {
    const result = r[scenario];
    if (!result) continue;
    const base = result.rows.find((row) => row.id === 'raw');
    for (const [id, min] of [
      ['ours-service', 0.95],
      ['ours-decorator', 0.85],
    ] as const) {
      const row = result.rows.find((x) => x.id === id);
      if (!row || !base) continue;
      // The same paired ratio as the report's tables.
      const value = throughputRatio(row, base);
      checks.push({
        scenario,
        target: `${row.label}: cycles/s >= ${min.toFixed(2)}x raw`,
        measured: ratio(value),
        met: Number.isFinite(value) ? value >= min : undefined,
      });
    }
  }
  if (r.C) {
    for (const variant of r.C.variants) {
      for (const id of ['ours-service', 'ours-decorator']) {
        const row = variant.rows.find((x) => x.id === id);
        if (!row) continue;
        const prefix = `${row.label}, ${variant.label}`;
        const add = (target: string, measured: string, met: boolean) =>
          checks.push({
            scenario: 'C',
            target: `${prefix}: ${target}`,
            measured,
            met: row.windows.length > 0 ? met : undefined,
          });
        add('acquisitions/s >= 1.0x raw', ratio(row.ratio), row.ratio >= 1);
        add('fairness <= 1.5', num(row.fairness), row.fairness <= 1.5);
        add(
          'no starved contender (worst window)',
          String(row.worstStarved),
          row.worstStarved === 0,
        );
        add(
          'longest wait <= 50 ms (worst window)',
          `${ms(row.worstLongestWaitMs)} ms`,
          row.worstLongestWaitMs <= 50,
        );
        add(
          'hand-off to another contender p50 <= 0.25 ms',
          `${ms(row.handoffP50)} ms`,
          row.handoffP50 <= 0.25,
        );
      }
    }
  }
  for (const size of r.D?.sizes ?? []) {
    const ours = size.rows.find((row) => row.id === 'ours-quorum');
    if (!ours) continue;
    checks.push({
      scenario: 'D',
      target: `ours, quorum mode (${size.nodes} nodes): cycle p50 <= 1.1x raw quorum baseline`,
      measured: ours.error
        ? `failed: ${ours.error}`
        : `${ratio(ours.p50Ratio)} (${ms(ours.cycleP50)} ms)`,
      met: ours.error ? false : ours.p50Ratio <= 1.1,
    });
  }
  if (r.F) {
    const f = r.F;
    const ran = f.status === 'ran';
    checks.push({
      scenario: 'F',
      target:
        'report the lock’s cost (3 instances, per-coupon lock vs. the script alone)',
      measured: ran
        ? `requests/s ${ratio((f.lockRequestsPerSec ?? NaN) / (f.scriptOnlyRequestsPerSec ?? NaN))}, p99 ${ms(f.lockP99Ms ?? NaN)} vs ${ms(f.scriptOnlyP99Ms ?? NaN)} ms`
        : f.message,
      met: ran ? f.runs!.every((run) => run.invariantsHeld) : undefined,
    });
  }
  if (r.G) {
    checks.push({
      scenario: 'G',
      target: `no growth after warm-up (heap within ${bytes(heapToleranceBytes)}; listeners, timers, connections, subscriptions, keys not above the first checkpoint)`,
      measured:
        r.G.grew.length === 0
          ? `heap ${bytes(r.G.heapGrowthBytes)}, nothing else grew`
          : `grew: ${r.G.grew.join(', ')} (heap ${bytes(r.G.heapGrowthBytes)})`,
      met:
        r.G.snapshots.length > 1 && !r.G.error
          ? r.G.grew.length === 0
          : undefined,
    });
  }
  return checks;
}

export function verdict(check: TargetCheck): string {
  if (check.met === undefined) return 'not measured';
  return check.met ? 'met' : '**MISSED**';
}
