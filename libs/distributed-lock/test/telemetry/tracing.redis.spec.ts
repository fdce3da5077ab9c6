/**
 * OpenTelemetry spans (`tracing` module option) through the real SDK's
 * in-memory exporter, after real lock traffic on a real Redis.
 */
import { trace, SpanStatusCode } from '@opentelemetry/api';
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

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(
  new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  }),
);

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
const ms = ([seconds, nanos]: [number, number]) => seconds * 1e3 + nanos / 1e6;

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
