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
  MemoryLockBackend,
  SemaphoreService,
  type DistributedLockModuleOptions,
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
});

afterAll(async () => {
  await server?.stop();
});
