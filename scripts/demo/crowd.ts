import { randomBytes } from 'node:crypto';
import type { DemoOptions } from './options.js';

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

export interface CrowdResult {
  /** Ends every user id of this run. */
  readonly run: string;
  readonly requests: number;
  readonly seconds: number;
  /** Answers by `ok` or error code. */
  readonly answers: Map<string, number>;
  /** Order ids of the 201 answers, by user. */
  readonly bought: Map<string, number[]>;
  /** Response times in ms, in the order they came. */
  readonly latencies: number[];
}

/**
 * `users` users arrive over `rampMs`, ever faster (user i at
 * rampMs * sqrt(i / users)), and each sends purchases one at a time, the next
 * about 1/rate s after the previous answer, until `rampMs + tailMs` after the
 * start. User i starts on instance i mod n; when an instance does not answer
 * (killed), the user moves on to the next one, as a load balancer would.
 */
export async function runCrowd(
  bases: readonly string[],
  couponId: number,
  options: DemoOptions,
  signal: AbortSignal,
  onTick: (result: CrowdResult) => Promise<void>,
): Promise<CrowdResult> {
  // user-001-<run>: the number first.
  const run = randomBytes(3).toString('hex');
  const answers = new Map<string, number>();
  const bought = new Map<string, number[]>();
  const latencies: number[] = [];
  let requests = 0;
  const started = performance.now();
  const endsAt = started + options.rampMs + options.tailMs;
  const pause = 1_000 / options.rate;
  const snapshot = (): CrowdResult => ({
    run,
    requests,
    seconds: (performance.now() - started) / 1_000,
    answers,
    bought,
    latencies,
  });

  const user = async (index: number) => {
    const userId = `user-${String(index + 1).padStart(3, '0')}-${run}`;
    let instance = index % bases.length;
    await sleep(options.rampMs * Math.sqrt(index / options.users), signal);
    while (performance.now() < endsAt && !signal.aborted) {
      let answer: string;
      const sent = performance.now();
      try {
        const response = await fetch(
          `${bases[instance]}/api/coupon/seckill/${couponId}`,
          {
            method: 'POST',
            headers: { userId },
            signal: AbortSignal.timeout(15_000),
          },
        );
        const body = (await response.json()) as {
          ok?: boolean;
          orderId?: number;
          code?: string;
        };
        if (response.status === 201 && body.ok === true) {
          answer = 'ok';
          bought.set(userId, [...(bought.get(userId) ?? []), body.orderId!]);
        } else {
          answer = body.code ?? `HTTP ${response.status}`;
        }
      } catch {
        answer = 'NO_ANSWER';
        instance = (instance + 1) % bases.length;
      }
      requests += 1;
      latencies.push(performance.now() - sent);
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
      // About `rate` a second, with jitter so that users do not move in step.
      await sleep(pause * (0.5 + Math.random()), signal);
    }
  };

  const done = new AbortController();
  const stopTicking = AbortSignal.any([signal, done.signal]);
  const ticker = (async () => {
    for (;;) {
      await sleep(1_000, stopTicking);
      if (stopTicking.aborted) return;
      await onTick(snapshot()).catch(() => undefined);
    }
  })();
  await Promise.all(Array.from({ length: options.users }, (_, i) => user(i)));
  done.abort();
  await ticker;
  return snapshot();
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

export const count = (value: number) => value.toLocaleString('en-US');

export function answerLine(answers: Map<string, number>): string {
  return [...answers]
    .toSorted((a, b) => b[1] - a[1])
    .map(([answer, n]) => `${answer} ${count(n)}`)
    .join(', ');
}
