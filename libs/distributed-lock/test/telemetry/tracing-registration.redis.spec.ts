/**
 * `tracing: 'auto'` with `@opentelemetry/api` installed but no SDK
 * registered yet: the lock makes no spans and keeps nothing for them until
 * a tracer provider is registered, then reports what starts after. A file
 * of its own: it registers the global provider midway, which no other file
 * may have done before.
 */
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Test, type TestingModule } from '@nestjs/testing';
import { DistributedLockModule, LockService } from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

let server: RedisServerHandle;
let moduleRef: TestingModule;

beforeAll(async () => {
  server = await startRedisServer();
  moduleRef = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: server.url })],
  }).compile();
  await moduleRef.init();
});
afterAll(async () => {
  await moduleRef.close();
  await server.stop();
});

it('reports only the acquisitions that start once a tracer provider is registered', async () => {
  const locks = moduleRef.get(LockService);
  const early = await locks.acquire('early:1');
  await (await locks.acquire('unheard:1')).release();

  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    }),
  );
  // Granted before the provider came: its hold is not reported either.
  await early.release();
  expect(exporter.getFinishedSpans()).toEqual([]);

  await (await locks.acquire('heard:1')).release();
  const spans = exporter
    .getFinishedSpans()
    .map((span) => [span.name, span.attributes['lock.name']]);
  expect(spans).toEqual([
    ['lock.acquire', 'heard:*'],
    ['lock.hold', 'heard:*'],
  ]);
});
