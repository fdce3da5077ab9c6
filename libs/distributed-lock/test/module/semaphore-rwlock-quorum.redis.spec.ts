/**
 * The quorum backend (`nodes`) has no semaphore store (see "No quorum
 * (Redlock) semaphore" in docs/guarantees.md), nor has a custom `backend`.
 * An app whose module uses one and that has a @DistributedSemaphore,
 * @ReadLock or @WriteLock method fails to start, naming the method. Without one it starts, and every
 * semaphore and read-write lock call through the services rejects at once
 * with LockUnsupportedError, which the interceptor answers with 500 and no
 * Retry-After: a configuration error, not an outage worth retrying.
 */
import type { AddressInfo } from 'node:net';
import {
  Controller,
  Get,
  Injectable,
  Module,
  Param,
  Post,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  DistributedLockModule,
  DistributedSemaphore,
  LockError,
  LockUnsupportedError,
  ReadLock,
  ReadWriteLockService,
  RedisLockBackend,
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
}

@Injectable()
class PriceReader {
  @ReadLock('price:<0>')
  async price(sku: string): Promise<string> {
    return sku;
  }
}

@Injectable()
class PriceWriter {
  @WriteLock('price:<0>')
  async reprice(sku: string): Promise<string> {
    return sku;
  }
}

/** Routes that use the services directly: the app starts, the calls fail. */
@Controller()
class PartnerController {
  constructor(
    private readonly semaphores: SemaphoreService,
    private readonly readWriteLocks: ReadWriteLockService,
  ) {}

  @Post('partner-call')
  call(): Promise<string> {
    return this.semaphores.using('partner-api', () => 'called', { limit: 2 });
  }

  @Get('price/:sku')
  price(@Param('sku') sku: string): Promise<string> {
    return this.readWriteLocks.withRead(`price:${sku}`, () => sku);
  }
}

const QUORUM_HAS_NONE = /the quorum backend \(`nodes`\) has none/;

let nodes: RedisServerHandle[];
let app: INestApplication;
let url: string;

function quorumModule() {
  return DistributedLockModule.forRoot({
    nodes: nodes.map((node) => node.url),
    waitTime: 10_000,
  });
}

beforeAll(async () => {
  nodes = await Promise.all([0, 1, 2].map(() => startRedisServer()));
  @Module({ imports: [quorumModule()], controllers: [PartnerController] })
  // oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
  class QuorumHttpModule {}
  app = await NestFactory.create(QuorumHttpModule, new ExpressAdapter(), {
    logger: false,
    abortOnError: false,
  });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  url = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await app?.close();
  await Promise.all(nodes.map((node) => node.stop()));
});

/** `call` rejects with LockUnsupportedError for `primitive`, without waiting. */
async function expectUnsupported(
  primitive: 'semaphore' | 'read-write lock',
  call: () => Promise<unknown>,
): Promise<void> {
  const startedAt = performance.now();
  const error = await call().then(
    () => new Error('expected a rejection'),
    (rejected: unknown) => rejected,
  );
  expect(error).toBeInstanceOf(LockUnsupportedError);
  expect(error).toBeInstanceOf(LockError);
  expect(error).toMatchObject({ code: 'LOCK_UNSUPPORTED', primitive });
  expect((error as Error).message).toMatch(QUORUM_HAS_NONE);
  // Refused, not waited for: waitTime is 10 s.
  expect(performance.now() - startedAt).toBeLessThan(1_000);
}

/** The error an app of `provider` and `lockModule` fails to start with. */
async function startupErrorWith(
  provider: Type,
  lockModule = quorumModule(),
): Promise<unknown> {
  const moduleRef = await Test.createTestingModule({
    imports: [lockModule],
    providers: [provider],
  }).compile();
  moduleRef.useLogger(false);
  try {
    await moduleRef.init();
    return new Error('expected the app not to start');
  } catch (error) {
    return error;
  } finally {
    await moduleRef.close();
  }
}

describe('semaphores and read-write locks with nodes (quorum)', () => {
  it('reject every SemaphoreService call with LockUnsupportedError', async () => {
    const semaphores = app.get(SemaphoreService);
    await expectUnsupported('semaphore', () =>
      semaphores.acquire('partner-api', { limit: 2 }),
    );
    await expectUnsupported('semaphore', () =>
      semaphores.tryAcquire('partner-api', { limit: 2 }),
    );
    await expectUnsupported('semaphore', () =>
      semaphores.using('partner-api', () => 'ran', { limit: 2 }),
    );
  });

  it('reject every ReadWriteLockService call with LockUnsupportedError', async () => {
    const locks = app.get(ReadWriteLockService);
    await expectUnsupported('read-write lock', () => locks.read('price:1'));
    await expectUnsupported('read-write lock', () => locks.write('price:1'));
    await expectUnsupported('read-write lock', () => locks.tryRead('price:1'));
    await expectUnsupported('read-write lock', () =>
      locks.withWrite('price:1', () => 'ran'),
    );
  });

  it('answer over HTTP with 500 and no Retry-After', async () => {
    for (const [response, message] of [
      [
        await request(url).post('/partner-call'),
        'This server does not support semaphores',
      ],
      [
        await request(url).get('/price/1'),
        'This server does not support read-write locks',
      ],
    ] as const) {
      expect(response.status).toBe(500);
      expect(response.headers).not.toHaveProperty('retry-after');
      expect(response.body).toMatchObject({
        statusCode: 500,
        error: 'Internal Server Error',
        code: 'LOCK_UNSUPPORTED',
        // The missing primitive, not the server's configuration.
        message,
      });
    }
  });

  it.each([
    ['@DistributedSemaphore', PartnerCalls, 'PartnerCalls.call', 'semaphore'],
    ['@ReadLock', PriceReader, 'PriceReader.price', 'read-write lock'],
    ['@WriteLock', PriceWriter, 'PriceWriter.reprice', 'read-write lock'],
  ] as const)(
    'refuse to start an app with a %s method',
    async (_decorator, provider, method, primitive) => {
      const error = await startupErrorWith(provider);
      expect(error).toBeInstanceOf(LockUnsupportedError);
      expect(error).toMatchObject({ code: 'LOCK_UNSUPPORTED', primitive });
      expect((error as Error).message).toContain(method);
      expect((error as Error).message).toMatch(QUORUM_HAS_NONE);
    },
  );

  it('refuse to start with a custom backend other than MemoryLockBackend too', async () => {
    const customBackend = DistributedLockModule.forRoot({
      backend: new RedisLockBackend({
        client: new Redis(nodes[0].url),
        ownsClient: true,
      }),
    });
    const error = await startupErrorWith(PartnerCalls, customBackend);
    expect(error).toBeInstanceOf(LockUnsupportedError);
    expect((error as Error).message).toMatch(
      /PartnerCalls\.call: .*a custom `backend` other than MemoryLockBackend has none/,
    );
  });
});
