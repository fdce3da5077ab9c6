import { Logger } from '@nestjs/common';
import type * as PromClient from 'prom-client';
import type { LockLostReason } from '../lock-service/lock-events.js';
import type { LockMetricsOptions } from './telemetry-options.js';
import type {
  AcquireRecord,
  BackendOperation,
  HandoffKind,
  HoldRecord,
  LockObserver,
} from './lock-observer.js';

const defaultWaitBuckets = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
const defaultHoldBuckets = [
  0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60,
];

/**
 * Reports to prom-client. Metrics already in the registry under the same name
 * (another LockService of the same process) are shared, not registered twice.
 */
export function prometheusObserver(
  prom: typeof PromClient,
  options: LockMetricsOptions = {},
): LockObserver {
  const registry = (options.registry ?? prom.register) as PromClient.Registry;
  const prefix = options.prefix ?? 'distributed_lock_';
  const metric = <T>(
    name: string,
    create: (config: never) => T,
    config: object,
  ): T =>
    (registry.getSingleMetric(prefix + name) as T | undefined) ??
    create({ ...config, name: prefix + name, registers: [registry] } as never);
  const counter = (name: string, help: string, labelNames: string[]) =>
    metric(name, (c) => new prom.Counter(c), { help, labelNames });
  const gauge = (name: string, help: string, labelNames: string[]) =>
    metric(name, (c) => new prom.Gauge(c), { help, labelNames });
  const histogram = (
    name: string,
    help: string,
    labelNames: string[],
    buckets: readonly number[],
  ) =>
    metric(name, (c) => new prom.Histogram(c), {
      help,
      labelNames,
      buckets: [...buckets],
    });

  const acquisitions = counter(
    'acquisitions_total',
    'Lock acquisitions by outcome: acquired, busy, timeout, aborted, error.',
    ['name', 'outcome'],
  );
  const waitSeconds = histogram(
    'wait_seconds',
    'Time from asking for a lock to its grant or refusal, in seconds.',
    ['name', 'outcome'],
    options.waitBuckets ?? defaultWaitBuckets,
  );
  const holdSeconds = histogram(
    'hold_seconds',
    'Time a lock key was held, from grant to release or loss, in seconds.',
    ['name'],
    options.holdBuckets ?? defaultHoldBuckets,
  );
  const lost = counter('lost_total', 'Holds lost while held, by reason.', [
    'name',
    'reason',
  ]);
  const handoffs = counter(
    'handoffs_total',
    'Grants handed over rather than taken free: local (in process) or remote (store queue).',
    ['kind'],
  );
  const renewals = counter(
    'renewals_total',
    'Renewals of a lock lease or of the process session, by result: kept or gone.',
    ['kind', 'result'],
  );
  const backendErrors = counter(
    'backend_errors_total',
    'Failed store calls (unreachable or too slow), by operation.',
    ['operation'],
  );
  const holds = gauge('holds', 'Lock keys held by this process now.', ['name']);
  const waiters = gauge(
    'waiters',
    'Acquisitions under way in this process now.',
    ['name'],
  );

  const names = new BoundedNames(options.maxNames ?? 100, prefix);
  return {
    acquireStarted: (name) => waiters.inc({ name: names.of(name) }),
    acquireEnded(record: AcquireRecord) {
      const labels = { name: names.of(record.name), outcome: record.outcome };
      waiters.dec({ name: labels.name });
      acquisitions.inc(labels);
      waitSeconds.observe(labels, (record.endedAt - record.startedAt) / 1_000);
    },
    holdStarted: (name) => holds.inc({ name: names.of(name) }),
    holdEnded(record: HoldRecord) {
      const name = names.of(record.name);
      holds.dec({ name });
      holdSeconds.observe(
        { name },
        (record.endedAt - record.grantedAt) / 1_000,
      );
    },
    lost: (name: string, reason: LockLostReason) =>
      lost.inc({ name: names.of(name), reason }),
    handoff: (kind: HandoffKind) => handoffs.inc({ kind }),
    renewal: (kind, kept) =>
      renewals.inc({ kind, result: kept ? 'kept' : 'gone' }),
    backendError: (operation: BackendOperation) =>
      backendErrors.inc({ operation }),
  };
}

/** Label values for lock names: the first `max` as they are, the rest as `other`. */
class BoundedNames {
  private readonly seen = new Set<string>();
  private warned = false;

  constructor(
    private readonly max: number,
    private readonly prefix: string,
  ) {}

  of(name: string): string {
    if (this.seen.has(name)) return name;
    if (this.seen.size < this.max) {
      this.seen.add(name);
      return name;
    }
    if (!this.warned) {
      this.warned = true;
      new Logger('DistributedLock').warn(
        `More than ${this.max} lock names in ${this.prefix}* metrics; "${name}" and later ones are counted as "other". Name locks by their template (the \`name\` option), not by their key.`,
      );
    }
    return 'other';
  }
}
