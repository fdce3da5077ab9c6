// The option types of metrics and traces, kept apart from the files that use
// prom-client and @opentelemetry/api: the published declarations reach these
// types, and must not need those optional packages installed.

/**
 * A prom-client `Registry`, as far as the library uses one (structural, so
 * the public types do not depend on prom-client's).
 */
export interface MetricsRegistry {
  registerMetric(metric: never): void;
  getSingleMetric(name: string): unknown;
}

/** The `metrics` module option, when given as an object. */
export interface LockMetricsOptions {
  /** The prom-client registry to register in. Default: prom-client's global `register`. */
  readonly registry?: MetricsRegistry;
  /** Prefix of every metric name. Default `'distributed_lock_'`. */
  readonly prefix?: string;
  /** Buckets of the wait-time histogram, in seconds. Default: 1 ms to 10 s. */
  readonly waitBuckets?: readonly number[];
  /** Buckets of the hold-time histogram, in seconds. Default: 1 ms to 60 s. */
  readonly holdBuckets?: readonly number[];
  /**
   * Most distinct lock names reported; later ones are counted under
   * `name="other"` (with one warning), so that keys used as names by mistake
   * cannot grow the series without bound. Default 100.
   */
  readonly maxNames?: number;
}

/** The `tracing` module option, when given as an object. */
export interface LockTracingOptions {
  /** Name of the tracer the spans come from. Default `'nest-distributed-lock'`. */
  readonly tracerName?: string;
}
