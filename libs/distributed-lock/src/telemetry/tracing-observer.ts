import type * as OpenTelemetry from '@opentelemetry/api';
import type { LockTracingOptions } from './telemetry-options.js';
import type {
  AcquireRecord,
  HoldRecord,
  LockObserver,
} from './lock-observer.js';

const ignore = (): void => undefined;

/**
 * Reports spans through the OpenTelemetry API: `lock.acquire` for every
 * acquisition (from the call to the grant or refusal) and `lock.hold` for
 * every held key (from the grant to the release), each a child of the span
 * active where the lock was asked for. Spans are made when their end is
 * known, with their real start time, and only while an SDK has a tracer
 * provider registered.
 */
export function tracingObserver(
  otel: typeof OpenTelemetry,
  options: LockTracingOptions = {},
): LockObserver {
  const tracer = otel.trace.getTracer(
    options.tracerName ?? 'nest-distributed-lock',
  );
  // Until an SDK registers a provider, the API's global proxy delegates to
  // one whose spans record nothing: the lock then makes no spans and keeps
  // no bookkeeping for them. A provider the proxy does not know (another
  // copy of the API) counts as registered.
  const unregistered = new otel.ProxyTracerProvider().getDelegate();
  const registered = (): boolean => {
    const provider = otel.trace.getTracerProvider();
    return (
      !(provider instanceof otel.ProxyTracerProvider) ||
      provider.getDelegate() !== unregistered
    );
  };
  return {
    isActive: registered,
    acquireStarted: ignore,
    acquireEnded(record: AcquireRecord) {
      if (!registered()) return;
      const span = tracer.startSpan('lock.acquire', {
        startTime: record.startedAt,
        kind: otel.SpanKind.INTERNAL,
        attributes: {
          'lock.name': record.name,
          'lock.keys': [...record.keys],
          'lock.outcome': record.outcome,
          'lock.wait_ms': record.endedAt - record.startedAt,
          ...(record.fencingToken === undefined
            ? {}
            : { 'lock.fencing_token': record.fencingToken }),
        },
      });
      if (record.outcome === 'error')
        span.setStatus({ code: otel.SpanStatusCode.ERROR });
      span.end(record.endedAt);
    },
    holdStarted: ignore,
    holdEnded(record: HoldRecord) {
      if (!registered()) return;
      const parent =
        (record.callerContext as OpenTelemetry.Context | undefined) ??
        otel.context.active();
      const span = tracer.startSpan(
        'lock.hold',
        {
          startTime: record.grantedAt,
          kind: otel.SpanKind.INTERNAL,
          attributes: {
            'lock.name': record.name,
            'lock.key': record.key,
            'lock.hold_ms': record.endedAt - record.grantedAt,
            ...(record.fencingToken === undefined
              ? {}
              : { 'lock.fencing_token': record.fencingToken }),
            ...(record.lostReason === undefined
              ? {}
              : { 'lock.lost_reason': record.lostReason }),
          },
        },
        parent,
      );
      if (record.lostReason)
        span.setStatus({
          code: otel.SpanStatusCode.ERROR,
          message: `lock lost (${record.lostReason})`,
        });
      span.end(record.endedAt);
    },
    lost: ignore,
    handoff: ignore,
    renewal: ignore,
    backendError: ignore,
    callerContext: () => otel.context.active(),
  };
}
