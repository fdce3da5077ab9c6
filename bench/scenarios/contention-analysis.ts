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
  /** What the longest wait was spent on (absent in runs from before). */
  readonly longestWaitParts?: WaitParts;
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

/**
 * A wait split into the time others held the lock and the time it sat free
 * between holders: long holds are the holders' (a 1 ms sleep that overran,
 * a stalled process), long free gaps the hand-offs'.
 */
export interface WaitParts {
  /** Acquisitions by others that came between its start and its end. */
  readonly grantsAhead: number;
  /** ms of the wait during which another contender held the lock (as its loop timed the hold). */
  readonly heldMs: number;
  /** ms of the wait during which nobody held it: hand-offs. */
  readonly freeMs: number;
  /** The longest of those hand-off gaps, ms. */
  readonly longestFreeMs: number;
}

interface Hold {
  readonly who: number;
  readonly wait: number;
  readonly acq: number;
  readonly rel: number;
}

/** {@link WaitParts} of the wait from `from` to `to`, given every hold of the window by acquisition time. */
function waitParts(
  holds: readonly Hold[],
  from: number,
  to: number,
): WaitParts {
  let grantsAhead = 0;
  let heldMs = 0;
  let longestFreeMs = 0;
  // Where the lock was last seen held until, within the wait.
  let cursor = from;
  for (const hold of holds) {
    if (hold.acq >= to) break;
    if (hold.rel <= from) continue;
    if (hold.acq >= from) grantsAhead += 1;
    const start = Math.max(hold.acq, cursor);
    const until = Math.min(hold.rel, to);
    longestFreeMs = Math.max(longestFreeMs, start - cursor);
    if (until > start) heldMs += until - start;
    cursor = Math.max(cursor, until);
  }
  longestFreeMs = Math.max(longestFreeMs, to - cursor);
  return {
    grantsAhead,
    heldMs,
    freeMs: to - from - heldMs,
    longestFreeMs,
  };
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
  const rows: Hold[] = [];
  let longestWait = 0;
  // The longest wait's span, from its start (or the window's) to its grant (or the window's end).
  let longestSpan = { from: startAt, to: startAt };
  const consider = (from: number, to: number) => {
    if (to - from <= longestWait) return;
    longestWait = to - from;
    longestSpan = { from, to };
  };
  let failures = 0;
  let stragglers = 0;
  let firstError: string | undefined;
  for (const part of parts) {
    const a = part.acquisitions;
    for (let i = 0; i < a.length; i += 4) {
      rows.push({ who: a[i], wait: a[i + 1], acq: a[i + 2], rel: a[i + 3] });
    }
    for (let i = 0; i < part.openWaits.length; i += 2) {
      consider(part.openWaits[i + 1], end);
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
    consider(Math.max(row.wait, startAt), row.acq);
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
    longestWaitParts: waitParts(rows, longestSpan.from, longestSpan.to),
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
