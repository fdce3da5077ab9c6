import type { AddressInfo } from 'node:net';
import {
  Controller,
  Get,
  Injectable,
  Module,
  Param,
  type INestApplication,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import request from 'supertest';
import {
  DistributedLockModule,
  DistributedSemaphore,
  LockTemplateError,
  MemoryLockBackend,
  SemaphoreService,
  type DistributedLockModuleOptions,
  type DistributedSemaphoreOptions,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { sleep } from '../../../../test/support/lock-fixtures.js';

/** Requests park here until the test lets them go. */
@Injectable()
class Gate {
  inside = 0;
  most = 0;
  private opened!: Promise<void>;
  open!: () => void;

  constructor() {
    this.reset();
  }

  reset(): void {
    this.opened = new Promise((resolve) => (this.open = resolve));
  }

  async pass(): Promise<void> {
    this.inside += 1;
    this.most = Math.max(this.most, this.inside);
    await this.opened;
    this.inside -= 1;
  }
}

@Controller('partner')
class PartnerController {
  constructor(private readonly gate: Gate) {}

  @Get('call')
  @DistributedSemaphore('partner-api', { permits: 2, waitTime: 0 })
  async call(): Promise<{ ok: true }> {
    await this.gate.pass();
    return { ok: true };
  }

  @Get('tenant/:id')
  @DistributedSemaphore('tenant:<0>', { permits: 1, waitTime: 0 })
  async tenant(@Param('id') id: string): Promise<{ id: string }> {
    await this.gate.pass();
    return { id };
  }

  @Get('bulk')
  @DistributedSemaphore('bulk', { permits: 3, take: 2, waitTime: 0 })
  async bulk(): Promise<{ ok: true }> {
    await this.gate.pass();
    return { ok: true };
  }

  // Two routes that disagree on the limit of one semaphore.
  @Get('shared/two')
  @DistributedSemaphore('shared', { permits: 2, waitTime: 0 })
  async sharedTwo(): Promise<{ ok: true }> {
    await this.gate.pass();
    return { ok: true };
  }

  @Get('shared/three')
  @DistributedSemaphore('shared', { permits: 3, waitTime: 0 })
  async sharedThree(): Promise<{ ok: true }> {
    await this.gate.pass();
    return { ok: true };
  }
}

async function startApp(
  options: DistributedLockModuleOptions,
): Promise<{ app: INestApplication; url: string; gate: Gate }> {
  @Module({
    imports: [DistributedLockModule.forRoot(options)],
    controllers: [PartnerController],
    providers: [Gate],
  })
  // oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
  class SemaphoreTestModule {}
  const app = await NestFactory.create(
    SemaphoreTestModule,
    new ExpressAdapter(),
    { logger: false, abortOnError: false },
  );
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, gate: app.get(Gate) };
}

const stores: [string, () => DistributedLockModuleOptions][] = [];
let server: RedisServerHandle | undefined;
stores.push(['Redis', () => ({ redis: server!.url })]);
stores.push([
  'MemoryLockBackend',
  () => ({ backend: new MemoryLockBackend() }),
]);

describe.each(stores)('@DistributedSemaphore over HTTP (%s)', (_, options) => {
  let app: INestApplication;
  let url: string;
  let gate: Gate;

  beforeAll(async () => {
    server ??= await startRedisServer();
    ({ app, url, gate } = await startApp(options()));
  });
  afterAll(async () => {
    await app.close();
  });
  afterEach(() => {
    gate.open();
    gate.reset();
  });

  it('answers 409 once every permit is taken, and serves again after', async () => {
    const first = [
      request(url).get('/partner/call'),
      request(url).get('/partner/call'),
    ];
    const inFlight = first.map((r) => r.then((response) => response));
    await vi.waitFor(() => expect(gate.inside).toBe(2));
    const busy = await request(url).get('/partner/call');
    expect(busy.status).toBe(409);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.body).toMatchObject({
      statusCode: 409,
      code: 'LOCK_NOT_ACQUIRED',
      key: 'partner-api',
    });
    expect(gate.most).toBe(2);
    gate.open();
    for (const response of await Promise.all(inFlight))
      expect(response.status).toBe(200);
    await sleep(20);
    const again = await request(url).get('/partner/call');
    expect(again.status).toBe(200);
  });

  it('builds the semaphore name from the arguments', async () => {
    const a = request(url)
      .get('/partner/tenant/a')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(1));
    expect((await request(url).get('/partner/tenant/a')).status).toBe(409);
    const b = request(url)
      .get('/partner/tenant/b')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(2));
    gate.open();
    expect((await a).status).toBe(200);
    expect((await b).body).toEqual({ id: 'b' });
  });

  it('provides SemaphoreService on the same store', async () => {
    const semaphores = app.get(SemaphoreService);
    const held = await semaphores.acquire('partner-api', {
      limit: 2,
      permits: 2,
    });
    expect((await request(url).get('/partner/call')).status).toBe(409);
    await held.release();
    gate.open();
    expect((await request(url).get('/partner/call')).status).toBe(200);
  });

  it('takes `take` permits per call', async () => {
    const semaphores = app.get(SemaphoreService);
    const first = request(url)
      .get('/partner/bulk')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(1));
    // 2 of 3 taken: one more permit fits, a second call does not.
    const one = await semaphores.tryAcquire('bulk', { limit: 3 });
    expect(one).not.toBeNull();
    expect(await semaphores.tryAcquire('bulk', { limit: 3 })).toBeNull();
    await one!.release();
    expect((await request(url).get('/partner/bulk')).status).toBe(409);
    gate.open();
    expect((await first).status).toBe(200);
  });

  it('answers 500 with SEMAPHORE_LIMIT_MISMATCH when callers disagree on the limit', async () => {
    const holding = request(url)
      .get('/partner/shared/two')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(1));
    const mismatch = await request(url).get('/partner/shared/three');
    expect(mismatch.status).toBe(500);
    expect(mismatch.body).toEqual({
      statusCode: 500,
      error: 'Internal Server Error',
      code: 'SEMAPHORE_LIMIT_MISMATCH',
      message:
        'Semaphore "shared" has 2 permits, but this caller asked for a limit of 3',
    });
    // The mismatched call never ran.
    expect(gate.inside).toBe(1);
    gate.open();
    expect((await holding).status).toBe(200);
  });
});

/** Defines a class whose method has `@DistributedSemaphore` with `options`. */
const decorate = (options: unknown) => () => {
  class Partner {
    @DistributedSemaphore('partner-api', options as DistributedSemaphoreOptions)
    async call(): Promise<void> {}
  }
  return Partner;
};

describe('@DistributedSemaphore validation', () => {
  it.each([
    ['no options', undefined, /options with `permits` are required/],
    [
      'permits 0',
      { permits: 0 },
      /permits must be a positive whole number, got 0/,
    ],
    ['fractional permits', { permits: 1.5 }, /permits must be .* got 1\.5/],
    [
      'take 0',
      { permits: 2, take: 0 },
      /take must be a whole number from 1 to permits, got 0/,
    ],
    ['take above permits', { permits: 2, take: 3 }, /take must be .* got 3/],
  ])('rejects %s when the class is defined', (_, options, message) => {
    expect(decorate(options)).toThrow(LockTemplateError);
    expect(decorate(options)).toThrow(message);
  });

  it('rejects a property that is not a method', () => {
    const decorator = DistributedSemaphore('partner-api', { permits: 1 });
    expect(() =>
      decorator({}, 'limit', { value: 10 } as PropertyDescriptor),
    ).toThrow(/can only decorate methods/);
  });

  it('rejects a call whose key names more than one semaphore', async () => {
    class Partner {
      @DistributedSemaphore(() => ['partner-a', 'partner-b'], { permits: 1 })
      async call(): Promise<void> {}
    }
    await expect(new Partner().call()).rejects.toThrow(
      /the key must name one semaphore, got 2/,
    );
  });
});

afterAll(async () => {
  await server?.stop();
});
