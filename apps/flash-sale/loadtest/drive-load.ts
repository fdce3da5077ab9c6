import type { InstanceClient, Outcome } from './http-client.js';
import type { ClientSuccess } from './invariants.js';
import type {
  LoadTestOptions,
  ResolvedLoadTestOptions,
} from './load-test-options.js';
import {
  summarize,
  type CrashReport,
  type LoadTestProgress,
} from './load-test-report.js';

export interface SentRequest {
  readonly instance: number;
  readonly userId: string;
  /** When it was sent, since the load started, in ms. */
  readonly sentAtMs: number;
  readonly outcome: Outcome;
}

export interface LoadResult {
  readonly records: SentRequest[];
  readonly successes: ClientSuccess[];
  readonly sent: number;
  readonly durationMs: number;
  readonly aborted: boolean;
  readonly timedOut: boolean;
  readonly crash?: CrashReport;
}

/** What a crash scenario gets from the load it runs beside. */
export interface CrashContext {
  /** The request whose sending set it off (0-based). */
  readonly atRequest: number;
  /** Ms since the load started, the time base of every report. */
  sinceStart(): number;
  /** Shown in the progress line until replaced; undefined clears it. */
  note(text: string | undefined): void;
  /** Resolves once the last request finished. */
  readonly loadDone: Promise<void>;
}

/** A crash set off by one request of the load, running beside it. */
export interface CrashScenario {
  readonly atRequest: number;
  run(context: CrashContext): Promise<CrashReport | undefined>;
}

/** Sends the requests with bounded concurrency, round-robin over the instances. */
export async function drive(
  options: ResolvedLoadTestOptions,
  input: LoadTestOptions,
  clients: InstanceClient[],
  couponId: number,
  crashScenario?: CrashScenario,
): Promise<LoadResult> {
  const plan = userOrder(options.requests, options.users, options.seed);
  const width = String(options.users - 1).length;
  const userName = (index: number) => `u${String(index).padStart(width, '0')}`;
  const records: SentRequest[] = [];
  const latencies: number[] = [];
  let sent = 0;
  let successes = 0;
  let serverErrors = 0;
  let transportErrors = 0;
  let aborted = false;
  let timedOut = false;
  let note: string | undefined;

  const started = performance.now();
  const deadline = started + options.maxDurationMs;
  let crash: CrashReport | undefined;
  let crashing: Promise<void> | undefined;
  let crashSettled = false;
  let loadFinished: (() => void) | undefined;
  const loadDone = new Promise<void>((resolve) => {
    loadFinished = resolve;
  });
  const startCrash = (scenario: CrashScenario) => {
    crashing = scenario
      .run({
        atRequest: scenario.atRequest,
        sinceStart: () => performance.now() - started,
        note: (text) => {
          note = text;
        },
        loadDone,
      })
      .then(
        (report) => {
          crash = report;
        },
        (error: unknown) => {
          input.onEvent?.(`The crash failed: ${(error as Error).message}`);
        },
      )
      .finally(() => {
        crashSettled = true;
        note = undefined;
      });
  };

  let lastTick = started;
  let lastFinished = 0;
  const progress = (): LoadTestProgress => {
    const now = performance.now();
    const finished = records.length;
    const rate =
      ((finished - lastFinished) * 1000) / Math.max(1, now - lastTick);
    lastTick = now;
    lastFinished = finished;
    return {
      elapsedMs: now - started,
      total: options.requests,
      sent,
      finished,
      successes,
      serverErrors,
      transportErrors,
      recentRequestsPerSecond: rate,
      latencyMs: summarize(latencies),
      note,
    };
  };
  const ticker = input.onProgress
    ? setInterval(
        () => input.onProgress?.(progress()),
        options.progressIntervalMs,
      )
    : undefined;

  const worker = async () => {
    for (;;) {
      if (input.signal?.aborted) {
        aborted = true;
        return;
      }
      if (performance.now() > deadline) {
        timedOut = true;
        return;
      }
      const position = sent;
      if (position >= plan.length) return;
      sent += 1;
      if (position === crashScenario?.atRequest) startCrash(crashScenario);
      const instance = position % clients.length;
      const userId = userName(plan[position]);
      const sentAtMs = performance.now() - started;
      const outcome = await clients[instance].buy(couponId, userId);
      records.push({ instance, userId, sentAtMs, outcome });
      if (outcome.kind === 'error') {
        transportErrors += 1;
        continue;
      }
      latencies.push(outcome.latencyMs);
      if (outcome.status === 201) successes += 1;
      if (outcome.status >= 500) serverErrors += 1;
    }
  };
  try {
    await Promise.all(
      Array.from(
        { length: Math.min(options.concurrency, plan.length) },
        worker,
      ),
    );
  } finally {
    if (ticker) clearInterval(ticker);
    loadFinished?.();
  }
  const durationMs = performance.now() - started;
  input.onProgress?.(progress());
  if (crashing) {
    if (!crashSettled) {
      input.onEvent?.(
        'Load done; waiting for the killed instance to come back',
      );
    }
    await crashing;
  }
  return {
    records,
    successes: records.flatMap(({ userId, outcome }) =>
      outcome.kind === 'response' && outcome.status === 201
        ? [{ userId, orderId: outcome.orderId }]
        : [],
    ),
    sent,
    durationMs,
    aborted,
    timedOut,
    crash,
  };
}

/**
 * Which user sends each request: every user the same number of times (±1),
 * in an order shuffled by a seeded generator, so runs are repeatable and a
 * user's repeated requests meet each other on different instances.
 */
export function userOrder(
  requests: number,
  users: number,
  seed: number,
): Uint32Array {
  const order = new Uint32Array(requests);
  for (let i = 0; i < requests; i++) order[i] = i % users;
  const random = mulberry32(seed);
  for (let i = requests - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
