/**
 * The quorum backend (`nodes`) has no semaphore store (see "No quorum
 * (Redlock) semaphore" in docs/guarantees.md): a module configured with
 * `nodes` starts, and every semaphore and read-write lock call, through the
 * services or the decorators, rejects at once with a LockBackendError that
 * names the reason.
 */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  DistributedLockModule,
  DistributedSemaphore,
  LockBackendError,
  ReadLock,
  ReadWriteLockService,
  SemaphoreService,
  WriteLock,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

@Injectable()
class PartnerCalls {
  @DistributedSemaphore('partner-api', { permits: 2 })
  async call(): Promise<string> {
    return 'called';
  }

  @ReadLock('price:<0>')
  async price(sku: string): Promise<string> {
    return sku;
  }

  @WriteLock('price:<0>')
  async reprice(sku: string): Promise<string> {
    return sku;
  }
}

const UNSUPPORTED =
  /need the module's Redis or Cluster connection: the quorum backend \(`nodes`\) has none/;

let nodes: RedisServerHandle[];
let app: TestingModule;

beforeAll(async () => {
  nodes = await Promise.all([0, 1, 2].map(() => startRedisServer()));
  app = await Test.createTestingModule({
    imports: [
      DistributedLockModule.forRoot({
        nodes: nodes.map((node) => node.url),
        waitTime: 10_000,
      }),
    ],
    providers: [PartnerCalls],
  }).compile();
  await app.init();
});
afterAll(async () => {
  await app?.close();
  await Promise.all(nodes.map((node) => node.stop()));
});

/** `call` rejects with the unsupported-store LockBackendError, without waiting. */
async function expectUnsupported(call: () => Promise<unknown>): Promise<void> {
  const startedAt = performance.now();
  const error = await call().then(
    () => new Error('expected a rejection'),
    (rejected: unknown) => rejected,
  );
  expect(error).toBeInstanceOf(LockBackendError);
  expect(error).toMatchObject({ code: 'LOCK_BACKEND_UNAVAILABLE' });
  expect((error as Error).message).toMatch(UNSUPPORTED);
  // Refused, not waited for: waitTime is 10 s.
  expect(performance.now() - startedAt).toBeLessThan(1_000);
}

describe('semaphores and read-write locks with nodes (quorum)', () => {
  it('reject every SemaphoreService call with LockBackendError', async () => {
    const semaphores = app.get(SemaphoreService);
    await expectUnsupported(() =>
      semaphores.acquire('partner-api', { limit: 2 }),
    );
    await expectUnsupported(() =>
      semaphores.tryAcquire('partner-api', { limit: 2 }),
    );
    await expectUnsupported(() =>
      semaphores.using('partner-api', () => 'ran', { limit: 2 }),
    );
  });

  it('reject every ReadWriteLockService call with LockBackendError', async () => {
    const locks = app.get(ReadWriteLockService);
    await expectUnsupported(() => locks.read('price:1'));
    await expectUnsupported(() => locks.write('price:1'));
    await expectUnsupported(() => locks.tryRead('price:1'));
    await expectUnsupported(() => locks.withWrite('price:1', () => 'ran'));
  });

  it('reject decorated methods with LockBackendError', async () => {
    const calls = app.get(PartnerCalls);
    await expectUnsupported(() => calls.call());
    await expectUnsupported(() => calls.price('1'));
    await expectUnsupported(() => calls.reprice('1'));
  });
});
