/**
 * A contention run for fault suites: several lock services (standing in for
 * processes) loop over a few keys, each holder entering a fenced resource per
 * key with its fencing token, writing on entering and before leaving. The
 * report is one row of a fault table: operations, overlaps seen unfenced,
 * stale writes the fenced resource accepted (must be 0), lost signals, and
 * errors by type.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedisLockBackend } from '../../libs/distributed-lock/src/backends/redis/redis-lock-backend.js';
import type { LockBackend } from '../../libs/distributed-lock/src/backends/lock-backend.js';
import { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import { FencedResource } from './fenced-resource.js';

/**
 * A contender for {@link runContention} on `client` (which it closes): short
 * leases and timeouts, so faults show within a run of seconds.
 */
export function contentionService(
  client: Redis | Cluster,
  commandTimeoutMs = 1000,
): LockService {
  client.on('error', () => undefined);
  return contentionLocks(
    new RedisLockBackend({
      client,
      ownsClient: true,
      commandTimeoutMs,
      handoffLeaseMs: 1000,
    }),
  );
}

/** A contender for {@link runContention} on any backend (which it closes). */
export function contentionLocks(backend: LockBackend): LockService {
  return new LockService({
    backend,
    keyPrefix: 'lock:',
    watchdogLeaseTime: 3000,
    waitTime: 2000,
    maxKeyLength: 512,
  });
}

export interface ContentionOptions {
  /** One per "process". */
  readonly services: readonly LockService[];
  readonly keys: readonly string[];
  /** Concurrent loops per service. */
  readonly loopsPerService: number;
  /** Run until this resolves (e.g. a fault injected, then healed). */
  readonly until: Promise<unknown>;
  /** Time inside the critical section, ms. Default 1. */
  readonly holdMs?: number;
  /** waitTime of each acquisition, ms. Default 2000. */
  readonly waitTime?: number;
  /** Seeded choice of key: (loop, iteration) → index. Default round robin. */
  readonly pickKey?: (loop: number, iteration: number) => number;
}

export interface ContentionReport {
  operations: number;
  acquired: number;
  /** Times two holders of one key were inside at once. */
  overlaps: number;
  /** Writes accepted from a holder after a later holder of the key had written. */
  staleAccepted: number;
  /** Writes the fenced resource rejected (a stale holder stopped). */
  rejected: number;
  /** Lost signals fired on held locks. */
  lost: number;
  /** Failed acquisitions and releases, by error class. */
  errors: Record<string, number>;
  /** Whether each key's accepted tokens rose strictly. */
  tokensRose: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runContention(
  options: ContentionOptions,
): Promise<ContentionReport> {
  const { services, keys, loopsPerService } = options;
  const holdMs = options.holdMs ?? 1;
  const waitTime = options.waitTime ?? 2000;
  const pickKey =
    options.pickKey ?? ((loop: number, i: number) => (loop + i) % keys.length);
  const resources = keys.map(() => new FencedResource());
  /** Per key, the order holders entered, and who of them wrote. */
  const entered = keys.map(() => [] as string[]);
  const wrote = keys.map(() => new Set<string>());
  const report: ContentionReport = {
    operations: 0,
    acquired: 0,
    overlaps: 0,
    staleAccepted: 0,
    rejected: 0,
    lost: 0,
    errors: {},
    tokensRose: true,
  };
  const run = { stopped: false };
  // A fault injection that fails stops the run and fails it, once the loops
  // are done, instead of surfacing as an unhandled rejection.
  const faults = options.until.then(
    () => undefined,
    (error: unknown) => ({ error }),
  );
  void faults.then(() => (run.stopped = true));

  const write = (k: number, name: string, token: number) => {
    const accepted = resources[k].write(token, name);
    if (!accepted) {
      report.rejected++;
      return;
    }
    const order = entered[k];
    const later = order.slice(order.lastIndexOf(name) + 1);
    if (later.some((other) => wrote[k].has(other))) report.staleAccepted++;
    wrote[k].add(name);
  };

  const loop = async (s: number, l: number): Promise<void> => {
    for (let i = 0; !run.stopped; i++) {
      const k = pickKey(s * loopsPerService + l, i);
      const name = `s${s}l${l}i${i}`;
      report.operations++;
      let inside = false;
      try {
        const handle = await services[s].acquire(keys[k], { waitTime });
        report.acquired++;
        handle.signal.addEventListener('abort', () => report.lost++, {
          once: true,
        });
        try {
          const token = await handle.fence();
          entered[k].push(name);
          if (resources[k].enter(name, token)) report.overlaps++;
          inside = true;
          write(k, name, token);
          await sleep(holdMs);
          write(k, name, token);
        } finally {
          if (inside) resources[k].leave(name);
          await handle.release();
        }
      } catch (error) {
        const type = (error as Error)?.constructor?.name ?? String(error);
        report.errors[type] = (report.errors[type] ?? 0) + 1;
        // A store that is away answers at once: do not spin.
        await sleep(20);
      }
    }
  };

  await Promise.all(
    services.flatMap((_service, s) =>
      Array.from({ length: loopsPerService }, (_loop, l) => loop(s, l)),
    ),
  );
  const failed = await faults;
  if (failed) throw failed.error;
  for (const resource of resources) {
    const tokens = resource.acceptedTokens;
    for (let i = 1; i < tokens.length; i++)
      if (tokens[i] < tokens[i - 1]) report.tokensRose = false;
  }
  return report;
}

/** Prints fault-suite rows as a Markdown table (for the docs' evidence). */
export function printFaultTable(
  title: string,
  rows: ReadonlyArray<{
    scenario: string;
    faults: string;
    report: ContentionReport;
  }>,
): string {
  const lines = [
    `${title}`,
    '',
    '| scenario | faults | operations | acquired | overlaps seen unfenced | stale writes accepted | lost signals | errors |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(({ scenario, faults, report: r }) => {
      const errors =
        Object.entries(r.errors)
          .map(([type, n]) => `${type} ${n}`)
          .join(', ') || 'none';
      return `| ${scenario} | ${faults} | ${r.operations} | ${r.acquired} | ${r.overlaps} | ${r.staleAccepted} | ${r.lost} | ${errors} |`;
    }),
  ];
  const text = lines.join('\n');
  console.log(text);
  return text;
}
