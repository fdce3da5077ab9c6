import type { LockObserver } from './lock-observer.js';
import { combineObservers } from './lock-observer.js';
import { prometheusObserver } from './prometheus-observer.js';
import type {
  LockMetricsOptions,
  LockTracingOptions,
} from './telemetry-options.js';
import { tracingObserver } from './tracing-observer.js';

/** The telemetry options of the module. */
export interface TelemetryOptions {
  readonly metrics?: boolean | LockMetricsOptions;
  readonly tracing?: boolean | 'auto' | LockTracingOptions;
}

/** What the module hands the service and its backend. */
export interface Telemetry {
  /** Told of acquisitions, holds and losses (metrics and traces). */
  readonly service?: LockObserver;
  /** Told of store failures, renewals and hand-offs (metrics only). */
  readonly backend?: LockObserver;
}

/**
 * Loads the optional peers the options ask for: prom-client for `metrics`,
 * `@opentelemetry/api` for `tracing`. A peer asked for and missing fails
 * startup with a message saying what to install; `tracing: 'auto'` (the
 * default) just goes without.
 */
export async function loadTelemetry(
  options: TelemetryOptions,
): Promise<Telemetry> {
  const { metrics = false, tracing = 'auto' } = options;
  checkOption('metrics', metrics);
  if (tracing !== 'auto') checkOption('tracing', tracing);
  const prometheus =
    metrics === false
      ? undefined
      : prometheusObserver(
          await importPeer<Parameters<typeof prometheusObserver>[0]>(
            'prom-client',
            'metrics',
            'Counter',
          ),
          metrics === true ? {} : metrics,
        );
  let traces: LockObserver | undefined;
  if (tracing !== false) {
    const otel = await importPeer<Parameters<typeof tracingObserver>[0]>(
      '@opentelemetry/api',
      'tracing',
      'SpanStatusCode',
    ).catch((error: unknown) => {
      if (tracing === 'auto') return undefined;
      throw error;
    });
    if (otel)
      traces = tracingObserver(
        otel,
        typeof tracing === 'object' ? tracing : {},
      );
  }
  return {
    service: combineObservers([prometheus, traces]),
    backend: prometheus,
  };
}

function checkOption(name: string, value: unknown): void {
  if (
    typeof value !== 'boolean' &&
    (typeof value !== 'object' || value === null)
  )
    throw new TypeError(
      `DistributedLockModule: ${name} must be true, false or an options object, got ${String(value)}`,
    );
}

/**
 * Imports the optional peer `name`, or fails saying what to install. Its
 * exports are the namespace when it has `member`, else its default export
 * (a CommonJS package may come as that only).
 */
async function importPeer<T>(
  name: string,
  option: string,
  member: string,
): Promise<T> {
  let loaded: { default?: T } & T;
  try {
    loaded = (await import(name)) as { default?: T } & T;
  } catch (error) {
    throw new Error(
      `DistributedLockModule: the ${option} option needs the package "${name}"; install it (npm install ${name})`,
      { cause: error },
    );
  }
  return (member in loaded ? loaded : loaded.default) as T;
}
