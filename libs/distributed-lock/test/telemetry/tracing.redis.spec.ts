/**
 * OpenTelemetry spans (`tracing` module option) through the real SDK's
 * in-memory exporter, after real lock traffic on a real Redis.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  ROOT_CONTEXT,
  trace,
  SpanStatusCode,
  type Context,
  type ContextManager,
  type Span,
} from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  DistributedLockModule,
  LockService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

/**
 * The active span follows async calls, as the Node SDK's context manager
 * makes it (not a dependency here, and the API's default keeps none).
 */
class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active = (): Context => this.storage.getStore() ?? ROOT_CONTEXT;
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(active, () => fn.call(thisArg, ...args));
  }
  bind = <T>(_context: Context, target: T): T => target;
  enable = (): this => this;
  disable = (): this => this;
}

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  }),
);
context.setGlobalContextManager(new AsyncContextManager());
const tracer = trace.getTracer('tracing-spec');

let server: RedisServerHandle;
let moduleRef: TestingModule | undefined;

beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(() => server.stop());
afterEach(async () => {
  await moduleRef?.close();
  moduleRef = undefined;
  exporter.reset();
});

async function lockService(
  options: Partial<DistributedLockModuleOptions> = {},
): Promise<LockService> {
  moduleRef = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url, ...options })],
  }).compile();
  await moduleRef.init();
  return moduleRef.get(LockService);
}

const spansNamed = (name: string) =>
  exporter.getFinishedSpans().filter((s) => s.name === name);
/** The parent span ids of the spans named `name`, in the order they ended. */
const parentsOf = (name: string) =>
  spansNamed(name).map((s) => s.parentSpanContext?.spanId);
const ms = ([seconds, nanos]: [number, number]) => seconds * 1e3 + nanos / 1e6;
/** Runs `fn` under a new active span named `name`, ended when `fn` settles. */
const inSpan = <T>(name: string, fn: (span: Span) => Promise<T>) =>
  tracer.startActiveSpan(name, (span) => fn(span).finally(() => span.end()));

describe('tracing: OpenTelemetry spans', () => {
  it('makes a lock.acquire span per acquisition and a lock.hold span per held key, with real times', async () => {
    const locks = await lockService();
    const before = Date.now();
    const handle = await locks.acquire('order:7', { fence: true });
    await new Promise((r) => setTimeout(r, 40));
    await handle.release();

    const [acquire] = spansNamed('lock.acquire');
    expect(acquire.attributes).toMatchObject({
      'lock.name': 'order:*',
      'lock.keys': ['order:7'],
      'lock.outcome': 'acquired',
      'lock.fencing_token': handle.fencingToken,
    });
    expect(ms(acquire.startTime)).toBeGreaterThanOrEqual(before - 1);
    expect(acquire.status.code).toBe(SpanStatusCode.UNSET);

    const [hold] = spansNamed('lock.hold');
    expect(hold.attributes).toMatchObject({
      'lock.name': 'order:*',
      'lock.key': 'order:7',
    });
    expect(hold.attributes['lock.hold_ms']).toBeGreaterThanOrEqual(35);
    expect(ms(hold.endTime) - ms(hold.startTime)).toBeGreaterThanOrEqual(35);
  });

  it('records refusals and failures as outcomes, and a lost hold as an error span', async () => {
    const locks = await lockService({ commandTimeout: 300 });
    const held = await locks.acquire('seat:1');
    expect(await locks.tryAcquire('seat:1', { name: 'seats' })).toBeNull();
    await held.release();
    const expiring = await locks.acquire('seat:2', { leaseTime: 50 });
    await new Promise((r) => setTimeout(r, 150));
    await expiring.release();
    await server.freeze();
    try {
      await expect(locks.acquire('seat:3', { waitTime: 0 })).rejects.toThrow();
    } finally {
      await server.thaw();
    }

    const outcomes = spansNamed('lock.acquire').map((s) => [
      s.attributes['lock.name'],
      s.attributes['lock.outcome'],
      s.status.code,
    ]);
    expect(outcomes).toEqual([
      ['seat:*', 'acquired', SpanStatusCode.UNSET],
      ['seats', 'busy', SpanStatusCode.UNSET],
      ['seat:*', 'acquired', SpanStatusCode.UNSET],
      ['seat:*', 'error', SpanStatusCode.ERROR],
    ]);
    const lost = spansNamed('lock.hold').find(
      (s) => s.attributes['lock.key'] === 'seat:2',
    );
    expect(lost?.attributes['lock.lost_reason']).toBe('lease-expired');
    expect(lost?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('makes lock.acquire and lock.hold spans children of the span active where the lock was asked for, also when released under another span or granted by a hand-off', async () => {
    const locks = await lockService();
    const first = await inSpan('checkout A', async (span) => ({
      spanId: span.spanContext().spanId,
      handle: await locks.acquire('cart:1'),
    }));
    // Queued behind A, granted by A's release under yet another span.
    const secondSpan = inSpan('checkout B', async (span) => ({
      spanId: span.spanContext().spanId,
      handle: await locks.acquire('cart:1', { waitTime: 5_000 }),
    }));
    await new Promise((r) => setTimeout(r, 20));
    await inSpan('cleanup', () => first.handle.release());
    const second = await secondSpan;
    await second.handle.release();

    // In the order they ended: A's, then B's.
    expect(parentsOf('lock.acquire')).toEqual([first.spanId, second.spanId]);
    expect(parentsOf('lock.hold')).toEqual([first.spanId, second.spanId]);
  });

  it("makes spans by default when @opentelemetry/api is installed ('auto'), and none with tracing: false", async () => {
    const auto = await lockService();
    await (await auto.acquire('auto:1')).release();
    expect(spansNamed('lock.acquire')).toHaveLength(1);
    await moduleRef?.close();
    exporter.reset();

    const off = await lockService({ tracing: false });
    await (await off.acquire('off:1')).release();
    expect(exporter.getFinishedSpans()).toHaveLength(0);
  });
});
