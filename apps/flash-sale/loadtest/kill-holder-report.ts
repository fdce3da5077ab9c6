import type { SentRequest } from './drive-load.js';
import { summarize, type LatencySummary } from './load-test-report.js';

/** What `killHolder` did, and what the load saw across the kill. */
export interface HolderKillReport {
  /** The coupon's lock in Redis, `lock:{coupon:<id>}`. */
  readonly lockKey: string;
  /** Freeze-and-check rounds made. */
  readonly tries: number;
  /** Whether an instance was caught holding the lock, and killed. */
  readonly caught: boolean;
  /** The killed instance (0-based). */
  readonly instance?: number;
  /** The killed instance's lock session (from its /health). */
  readonly session?: string;
  /** The token it held the lock with, `<session>.<random>`, read while it was frozen. */
  readonly token?: string;
  /** Wall-clock time of the SIGKILL. */
  readonly killedAt?: string;
  /**
   * From the kill until Redis first showed the lock held by no token of the
   * dead session (read every 10 ms).
   */
  readonly lockFreedAfterMs?: number;
  /**
   * From the kill until Redis last showed the lock held by a token of the
   * dead session: later than `lockFreedAfterMs` when the lock was handed
   * again to a waiter the dead instance had queued.
   */
  readonly deadSessionLastHeldAfterMs?: number;
  /** From the kill until the first 201 of another instance after the lock was freed. */
  readonly servedAgainAfterMs?: number;
  /** The longest time after the kill (up to the last 201) in which no 201 was answered. */
  readonly longestSaleGapMs?: number;
  /** The requests in flight at the kill or sent after it. */
  readonly acrossKill?: AcrossKill;
}

export interface AcrossKill {
  readonly requests: number;
  readonly answers: number;
  /** 429 BUSY: waited for the coupon's lock longer than SECKILL_WAIT_MS. */
  readonly busy: number;
  /** 503 answers (a lock lost or Redis or the database unavailable). */
  readonly unavailable: number;
  /** Connection errors and timeouts (those to the dead instance among them). */
  readonly connectionErrors: number;
  /** Of the HTTP answers. */
  readonly latencyMs: LatencySummary | null;
}

/** What the scenario saw while it ran; times since the load started, in ms. */
export interface HolderKillObservation {
  readonly lockKey: string;
  readonly tries: number;
  readonly caught?: {
    readonly instance: number;
    readonly session: string;
    readonly token: string;
    readonly killedAtMs: number;
    readonly killedAt: Date;
  };
  readonly lockFreedAtMs?: number;
  readonly deadSessionLastHeldAtMs?: number;
}

/** The report of a holder kill, from what it saw and every request of the load. */
export function holderKillReport(
  seen: HolderKillObservation,
  records: readonly SentRequest[],
): HolderKillReport {
  const base = { lockKey: seen.lockKey, tries: seen.tries };
  const { caught } = seen;
  if (!caught) return { ...base, caught: false };
  const since = (atMs: number | undefined) =>
    atMs === undefined ? undefined : Math.round(atMs - caught.killedAtMs);
  const across = records.filter((r) => finishedAt(r) >= caught.killedAtMs);
  const answers = across.flatMap(({ outcome }) =>
    outcome.kind === 'response' ? [outcome] : [],
  );
  const sales = across
    .filter((r) => r.outcome.kind === 'response' && r.outcome.status === 201)
    .map((r) => ({ instance: r.instance, at: finishedAt(r) }))
    .toSorted((a, b) => a.at - b.at);
  const freedAt = seen.lockFreedAtMs;
  const servedAgainAt =
    freedAt === undefined
      ? undefined
      : sales.find((s) => s.instance !== caught.instance && s.at >= freedAt)
          ?.at;
  let gap: number | undefined;
  let previous = caught.killedAtMs;
  for (const { at } of sales) {
    gap = Math.max(gap ?? 0, at - previous);
    previous = at;
  }
  return {
    ...base,
    caught: true,
    instance: caught.instance,
    session: caught.session,
    token: caught.token,
    killedAt: caught.killedAt.toISOString(),
    lockFreedAfterMs: since(freedAt),
    deadSessionLastHeldAfterMs: since(seen.deadSessionLastHeldAtMs),
    servedAgainAfterMs: since(servedAgainAt),
    longestSaleGapMs: gap === undefined ? undefined : Math.round(gap),
    acrossKill: {
      requests: across.length,
      answers: answers.length,
      busy: answers.filter((a) => a.status === 429).length,
      unavailable: answers.filter((a) => a.status === 503).length,
      connectionErrors: across.length - answers.length,
      latencyMs: summarize(answers.map((a) => a.latencyMs)),
    },
  };
}

/** When a request's answer (or error) came, since the load started. */
function finishedAt(request: SentRequest): number {
  return request.sentAtMs + request.outcome.latencyMs;
}
