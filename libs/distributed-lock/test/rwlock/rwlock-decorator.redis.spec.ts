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
  MemoryLockBackend,
  ReadLock,
  ReadWriteLockService,
  WriteLock,
  currentReadWriteLock,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

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

/** The README's `Prices` example, and a reader that tries to write. */
@Injectable()
class PriceBook {
  constructor(
    private readonly locks: ReadWriteLockService,
    private readonly gate: Gate,
  ) {}

  @ReadLock('price:<0>', { waitTime: 0 })
  async get(_sku: string) {
    const lock = currentReadWriteLock()!;
    return {
      mode: lock.mode,
      reentrant: lock.reentrant,
      fencingToken: lock.fencingToken,
    };
  }

  // The writer reads through the @ReadLock method: it joins the write hold.
  async reprice(sku: string) {
    return this.locks.withWrite(`price:${sku}`, async (lock) => {
      const read = await this.get(sku);
      await this.gate.pass();
      return { read, fencingToken: lock.fencingToken };
    });
  }

  @ReadLock('price:<0>', { waitTime: 0 })
  async readThenWrite(sku: string) {
    return this.set(sku);
  }

  @WriteLock('price:<0>', { waitTime: 0 })
  async set(sku: string) {
    return { sku };
  }
}

@Controller('price')
class PriceController {
  constructor(
    private readonly gate: Gate,
    private readonly book: PriceBook,
  ) {}

  @Get(':sku/reprice')
  reprice(@Param('sku') sku: string) {
    return this.book.reprice(sku);
  }

  @Get(':sku/upgrade')
  upgrade(@Param('sku') sku: string) {
    return this.book.readThenWrite(sku);
  }

  @Get(':sku')
  @ReadLock('price:<0>', { waitTime: 0 })
  async read(@Param('sku') sku: string): Promise<{ sku: string }> {
    await this.gate.pass();
    return { sku };
  }

  @Get(':sku/set')
  @WriteLock('price:<0>', { waitTime: 0 })
  async write(
    @Param('sku') sku: string,
  ): Promise<{ sku: string; fencingToken?: number }> {
    await this.gate.pass();
    return { sku, fencingToken: currentReadWriteLock()?.fencingToken };
  }
}

async function startApp(
  options: DistributedLockModuleOptions,
): Promise<{ app: INestApplication; url: string; gate: Gate }> {
  @Module({
    imports: [DistributedLockModule.forRoot(options)],
    controllers: [PriceController],
    providers: [Gate, PriceBook],
  })
  // oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
  class ReadWriteLockTestModule {}
  const app = await NestFactory.create(
    ReadWriteLockTestModule,
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

describe.each(stores)('@ReadLock / @WriteLock over HTTP (%s)', (_, options) => {
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
    gate.most = 0;
  });

  it('lets readers overlap, and answers a writer 409 meanwhile', async () => {
    const readers = [0, 1].map(() =>
      request(url)
        .get('/price/a')
        .then((r) => r),
    );
    await vi.waitFor(() => expect(gate.inside).toBe(2));
    const busy = await request(url).get('/price/a/set');
    expect(busy.status).toBe(409);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.body).toMatchObject({
      statusCode: 409,
      code: 'LOCK_NOT_ACQUIRED',
      key: 'price:a',
    });
    // Another name is another lock.
    const other = request(url)
      .get('/price/b/set')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(3));
    gate.open();
    for (const response of await Promise.all(readers))
      expect(response.status).toBe(200);
    expect((await other).status).toBe(200);
    expect(gate.most).toBe(3);
  });

  it('gives a writer the lock alone, with a fencing token', async () => {
    const writer = request(url)
      .get('/price/a/set')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(1));
    expect((await request(url).get('/price/a')).status).toBe(409);
    expect((await request(url).get('/price/a/set')).status).toBe(409);
    gate.open();
    const done = await writer;
    expect(done.status).toBe(200);
    expect(done.body.fencingToken).toBeGreaterThan(0);
  });

  it('provides ReadWriteLockService on the same store', async () => {
    const locks = app.get(ReadWriteLockService);
    const held = await locks.write('price:a');
    expect((await request(url).get('/price/a')).status).toBe(409);
    await held.release();
    gate.open();
    expect((await request(url).get('/price/a')).status).toBe(200);
  });

  it('lets a @ReadLock method called inside withWrite join the write hold', async () => {
    const repricing = request(url)
      .get('/price/a/reprice')
      .then((r) => r);
    await vi.waitFor(() => expect(gate.inside).toBe(1));
    // The writer still holds the lock alone.
    expect((await request(url).get('/price/a')).status).toBe(409);
    gate.open();
    const done = await repricing;
    expect(done.status).toBe(200);
    expect(done.body.fencingToken).toBeGreaterThan(0);
    expect(done.body.read).toEqual({
      mode: 'read',
      reentrant: true,
      fencingToken: done.body.fencingToken,
    });
  });

  it('answers 500 with LOCK_UPGRADE_REFUSED when a reader asks to write, and frees the read lock', async () => {
    const refused = await request(url).get('/price/a/upgrade');
    expect(refused.status).toBe(500);
    expect(refused.body).toEqual({
      statusCode: 500,
      error: 'Internal Server Error',
      code: 'LOCK_UPGRADE_REFUSED',
      message:
        'Read-write lock "price:a": this call chain holds the read lock and cannot upgrade to the write lock; release the read lock first',
    });
    gate.open();
    expect((await request(url).get('/price/a/set')).status).toBe(200);
  });
});

afterAll(async () => {
  await server?.stop();
});
