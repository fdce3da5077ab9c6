import { summarize } from '../stats.js';
import type { ContentionEvents } from './contention-core.js';

/** The figures of one contention window. */
export interface ContentionFigures {
  readonly acquisitions: number;
  readonly acquisitionsPerSec: number;
  /** Release began -> next acquisition by a different contender, ms. */
  readonly handoffP50: number;
  readonly handoffP99: number;
  readonly handoffs: number;
  /** Longest wait, including waits still open when the window ended, ms. */
  readonly longestWaitMs: number;
  /** max/min acquisitions per contender (Infinity when one got none). */
  readonly fairness: number;
  readonly starved: number;
  /** Share of consecutive acquisitions by the contender that had just released. */
  readonly selfHandoffShare: number;
  readonly perContender: number[];
  /** Acquisitions that began before the previous holder started releasing (should be 0). */
  readonly overlaps: number;
  readonly failures: number;
  readonly stragglers: number;
  readonly firstError?: string;
}

/** C's fairness (most acquisitions of one contender over the fewest, Infinity when one got none) and starved contenders. */
export function fairnessOf(perContender: readonly number[]): {
  fairness: number;
  starved: number;
} {
  const most = Math.max(...perContender);
  const least = Math.min(...perContender);
  return {
    fairness: least === 0 ? Number.POSITIVE_INFINITY : most / least,
    starved: perContender.filter((n) => n === 0).length,
  };
}

/** Merges the processes' events of one window and computes its figures. */
export function analyzeContention(
  parts: readonly ContentionEvents[],
  contenders: number,
  startAt: number,
  windowMs: number,
): ContentionFigures {
  const end = startAt + windowMs;
  const rows: { who: number; wait: number; acq: number; rel: number }[] = [];
  let longestWait = 0;
  let failures = 0;
  let stragglers = 0;
  let firstError: string | undefined;
  for (const part of parts) {
    const a = part.acquisitions;
    for (let i = 0; i < a.length; i += 4) {
      rows.push({ who: a[i], wait: a[i + 1], acq: a[i + 2], rel: a[i + 3] });
    }
    for (let i = 0; i < part.openWaits.length; i += 2) {
      longestWait = Math.max(longestWait, end - part.openWaits[i + 1]);
    }
    failures += part.failures;
    stragglers += part.stragglers;
    firstError ??= part.firstError;
  }
  rows.sort((x, y) => x.acq - y.acq);
  const perContender = Array.from({ length: contenders }, () => 0);
  const handoffs: number[] = [];
  let selfHandoffs = 0;
  let overlaps = 0;
  for (const [i, row] of rows.entries()) {
    perContender[row.who] += 1;
    // Waits are counted from the window's start for loops that began early.
    longestWait = Math.max(longestWait, row.acq - Math.max(row.wait, startAt));
    if (i === 0) continue;
    const prev = rows[i - 1];
    // 50 us of slack for the processes' clocks.
    if (row.acq < prev.rel - 0.05) overlaps += 1;
    if (prev.who === row.who) selfHandoffs += 1;
    else handoffs.push(row.acq - prev.rel);
  }
  const { fairness, starved } = fairnessOf(perContender);
  const latency = summarize(handoffs);
  return {
    acquisitions: rows.length,
    acquisitionsPerSec: (rows.length * 1000) / windowMs,
    handoffP50: latency.p50,
    handoffP99: latency.p99,
    handoffs: handoffs.length,
    longestWaitMs: longestWait,
    fairness,
    starved,
    selfHandoffShare: rows.length > 1 ? selfHandoffs / (rows.length - 1) : 0,
    perContender,
    overlaps,
    failures,
    stragglers,
    firstError,
  };
}
