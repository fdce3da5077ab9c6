/**
 * The test kit users get: `DistributedLockModule.forRoot({ backend: new
 * MemoryLockBackend() })` runs decorated controllers and providers in a unit or
 * e2e test without any Redis. No redis-server is started in this file.
 */
import {
  Body,
  Controller,
  Injectable,
  Param,
  ParseIntPipe,
  Post,
  type INestApplication,
} from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import request from 'supertest';
import {
  DistributedLock,
  DistributedLockModule,
  LockBackendError,
  LockService,
  MemoryLockBackend,
  currentLock,
  type LockErrorBody,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { gate } from './module-helpers.js';

@Injectable()
class SeatLedger {
  inside = 0;
  maxInside = 0;
  readonly booked: number[] = [];
  readonly fencingTokens: number[] = [];
  /** Reentrant holds seen by the inner method. */
  readonly reentrant: boolean[] = [];

  /** Called from the controller's locked handler with the same key. */
  @DistributedLock('seat:<0>')
  async record(seat: number): Promise<void> {
    const lock = currentLock();
    this.reentrant.push(lock?.reentrant ?? false);
    this.maxInside = Math.max(this.maxInside, ++this.inside);
    await sleep(5);
    this.booked.push(seat);
    this.fencingTokens.push((await lock?.fence()) ?? -1);
    this.inside--;
  }
}

@Controller('seats')
class SeatsController {
  holdGate?: { promise: Promise<void>; open: () => void };

  constructor(private readonly ledger: SeatLedger) {}

  @Post('by-body')
  @DistributedLock('seat:<0.seat>', { waitTime: 0 })
  async byBody(@Body() body: { seat?: number }): Promise<{ seat?: number }> {
    return { seat: body.seat };
  }

  @Post(':seat/hold')
  @DistributedLock('seat:<0>', { waitTime: 0 })
  async hold(
    @Param('seat', ParseIntPipe) seat: number,
  ): Promise<{ seat: number; fencingToken?: number }> {
    await this.holdGate?.promise;
    return { seat, fencingToken: await currentLock()?.fence() };
  }

  @Post(':seat/book')
  @DistributedLock('seat:<0>', { waitTime: 5_000 })
  async book(
    @Param('seat', ParseIntPipe) seat: number,
  ): Promise<{ seat: number; fencingToken?: number }> {
    await this.ledger.record(seat);
    return { seat, fencingToken: await currentLock()?.fence() };
  }
}

let moduleRef: TestingModule;
let app: INestApplication;

beforeEach(async () => {
  moduleRef = await Test.createTestingModule({
    imports: [
      DistributedLockModule.forRoot({ backend: new MemoryLockBackend() }),
    ],
    controllers: [SeatsController],
    providers: [SeatLedger],
  }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.init();
});

afterEach(async () => {
  await app?.close();
});

describe('MemoryLockBackend as a test kit', () => {
  it('answers a busy lock with 409 through the interceptor', async () => {
    const controller = app.get(SeatsController);
    const held = gate();
    controller.holdGate = held;
    const http = request(app.getHttpServer());

    const first = http.post('/seats/4/hold').then((response) => response);
    await eventually(() => app.get(LockService).isLocked('seat:4'));
    const second = await request(app.getHttpServer()).post('/seats/4/hold');

    expect(second.status).toBe(409);
    expect(second.headers['retry-after']).toBe('1');
    expect(second.body).toEqual({
      statusCode: 409,
      error: 'Conflict',
      code: 'LOCK_NOT_ACQUIRED',
      key: 'seat:4',
      message: expect.stringContaining('seat:4') as string,
    } satisfies Record<keyof LockErrorBody, unknown>);

    held.open();
    const winner = await first;
    expect(winner.status).toBe(201);
    expect(winner.body).toMatchObject({ seat: 4 });
    expect(await app.get(LockService).isLocked('seat:4')).toBe(false);
  });

  it('excludes concurrent requests that wait their turn', async () => {
    const ledger = app.get(SeatLedger);
    const server = app.getHttpServer();

    const responses = await Promise.all(
      Array.from({ length: 6 }, () => request(server).post('/seats/7/book')),
    );

    expect(responses.map((response) => response.status)).toEqual(
      Array(6).fill(201),
    );
    expect(ledger.maxInside).toBe(1);
    expect(ledger.booked).toEqual(Array(6).fill(7));
  });

  it('is reentrant: the handler calls a provider locking the same key', async () => {
    const ledger = app.get(SeatLedger);
    const startedAt = Date.now();

    const response = await request(app.getHttpServer()).post('/seats/2/book');

    expect(response.status).toBe(201);
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    expect(ledger.reentrant).toEqual([true]);
    // The nested hold shares the outer lock's fencing token.
    expect(ledger.fencingTokens).toEqual([response.body.fencingToken]);
  });

  it('hands out strictly increasing fencing tokens per key', async () => {
    const server = app.getHttpServer();
    const tokens: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await request(server).post('/seats/3/book');
      tokens.push(response.body.fencingToken as number);
    }
    const other = await request(server).post('/seats/8/book');

    expect(tokens).toEqual([1, 2, 3]);
    expect(other.body.fencingToken).toBe(1);
  });

  it('answers a key that cannot be built with 400 LOCK_KEY_INVALID', async () => {
    const server = app.getHttpServer();
    const missing = await request(server).post('/seats/by-body').send({});
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({
      statusCode: 400,
      code: 'LOCK_KEY_INVALID',
    });

    const given = await request(server)
      .post('/seats/by-body')
      .send({ seat: 6 });
    expect(given.status).toBe(201);
    expect(given.body).toEqual({ seat: 6 });
  });

  it('works for providers called directly in a unit test', async () => {
    const ledger = moduleRef.get(SeatLedger);
    await Promise.all([ledger.record(1), ledger.record(1), ledger.record(1)]);
    expect(ledger.maxInside).toBe(1);
    expect(ledger.fencingTokens).toEqual([1, 2, 3]);
    expect(ledger.reentrant).toEqual([false, false, false]);
  });

  it('lets a test hold a key through LockService to force the busy path', async () => {
    const locks = app.get(LockService);
    const handle = await locks.acquire('seat:5');

    const response = await request(app.getHttpServer()).post('/seats/5/hold');
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({ code: 'LOCK_NOT_ACQUIRED' });

    await handle.release();
    const again = await request(app.getHttpServer()).post('/seats/5/hold');
    expect(again.status).toBe(201);
  });

  it('closes the backend with the app, so each app needs a new one', async () => {
    const backend = new MemoryLockBackend();
    const other = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ backend })],
    }).compile();
    await other.init();
    const handle = await other.get(LockService).acquire('seat:9');
    expect(await backend.isLocked('lock:{seat:9}')).toBe(true);

    await other.close();
    await expect(backend.isLocked('lock:{seat:9}')).rejects.toBeInstanceOf(
      LockBackendError,
    );
    // The lock went with the backend: releasing it now rejects.
    await expect(handle.release()).rejects.toBeInstanceOf(LockBackendError);
  });
});
