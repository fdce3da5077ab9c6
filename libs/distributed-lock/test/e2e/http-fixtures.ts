import type { AddressInfo } from 'node:net';
import {
  Body,
  Controller,
  Header,
  Headers,
  HttpCode,
  HttpException,
  Injectable,
  Module,
  NotFoundException,
  Param,
  ParseIntPipe,
  Post,
  Query,
  UnprocessableEntityException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { NestFactory, Reflector } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import {
  FastifyAdapter,
  type NestFastifyApplication,
} from '@nestjs/platform-fastify';
import {
  ApiOperation,
  ApiResponse,
  DECORATORS,
  DocumentBuilder,
  SwaggerModule,
} from '@nestjs/swagger';
import { Redis } from 'ioredis';
import {
  concatMap,
  from,
  interval,
  map,
  Observable,
  take,
  throwError,
  toArray,
} from 'rxjs';
import request from 'supertest';
import {
  currentLock,
  DISTRIBUTED_LOCK_METADATA,
  DistributedLock,
  DistributedLockModule,
  LockNotAcquiredError,
  LockService,
  LockTemplateError,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { openMonitor } from '../../../../test/support/redis-monitor.js';

export type HttpAdapterName = 'express' | 'fastify';

export const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `condition` every 5 ms until it holds; fails after `timeoutMs`. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) {
      throw new Error(`${what} not met within ${timeoutMs} ms`);
    }
    await sleep(5);
  }
}

interface Gate {
  readonly promise: Promise<void>;
  readonly open: () => void;
}

function createGate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Lets a test see and steer what handlers do: each handler passes a
 * checkpoint, which records `enter <label> <tag>` and `exit <label> <tag>`
 * and, when the test called {@link hold} for that label beforehand, waits in
 * between until the test opens the gate. Gates are one-shot: only the next
 * request reaching the label waits, later ones pass straight through.
 */
@Injectable()
export class Probe {
  readonly events: string[] = [];
  private readonly gates = new Map<string, Gate[]>();
  /** Every gate handed out, so that {@link reset} can open the forgotten ones. */
  private readonly handedOut = new Set<Gate>();

  /** The next handler reaching `label` waits until the returned function is called. */
  hold(label: string): () => void {
    const gate = createGate();
    let queue = this.gates.get(label);
    if (!queue) this.gates.set(label, (queue = []));
    queue.push(gate);
    this.handedOut.add(gate);
    return gate.open;
  }

  async checkpoint(label: string, tag = '-'): Promise<void> {
    this.events.push(`enter ${label} ${tag}`);
    const gate = this.gates.get(label)?.shift();
    if (gate) await gate.promise;
    this.events.push(`exit ${label} ${tag}`);
  }

  /** Resolves once a handler entered `label` (with `tag`, if given). */
  entered(label: string, tag?: string): Promise<void> {
    const wanted = (event: string) =>
      tag === undefined
        ? event.startsWith(`enter ${label} `)
        : event === `enter ${label} ${tag}`;
    return eventually(
      () => this.events.some(wanted),
      5_000,
      `a handler entering ${label}`,
    );
  }

  /** Opens every gate and forgets all events (between tests). */
  reset(): void {
    for (const gate of this.handedOut) gate.open();
    this.handedOut.clear();
    this.gates.clear();
    this.events.length = 0;
  }
}

/** Rejects any request that carries an `x-deny` header (Nest answers 403). */
@Injectable()
export class DenyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const headers = context.switchToHttp().getRequest<{
      headers: Record<string, unknown>;
    }>().headers;
    return headers['x-deny'] === undefined;
  }
}

const heldKeys = () => [...(currentLock()?.keys ?? [])];

@Controller('coupons')
export class CouponController {
  constructor(private readonly probe: Probe) {}

  @Post(':id')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  async claim(
    @Param('id', ParseIntPipe) id: number,
    @Headers('x-tag') tag?: string,
  ) {
    await this.probe.checkpoint(`coupon:${id}`, tag);
    return { id, keys: heldKeys() };
  }

  @Post(':id/queued')
  @DistributedLock('coupon:<0>', { waitTime: 10_000 })
  async claimQueued(
    @Param('id', ParseIntPipe) id: number,
    @Headers('x-tag') tag?: string,
  ) {
    await this.probe.checkpoint(`coupon:${id}`, tag);
    return { id, keys: heldKeys() };
  }

  @Post(':id/not-found')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  async notFound(@Param('id', ParseIntPipe) id: number): Promise<never> {
    await this.probe.checkpoint(`coupon:${id}`, 'not-found');
    throw new NotFoundException(`Coupon ${id} does not exist`);
  }

  /** Declared Observable: the lock is held until the stream completes. */
  @Post(':id/stream')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  stream(@Param('id', ParseIntPipe) id: number): Observable<number[]> {
    return interval(10).pipe(
      take(5),
      toArray(),
      concatMap((ticks) =>
        from(this.probe.checkpoint(`stream:${id}`)).pipe(map(() => ticks)),
      ),
    );
  }

  @Post(':id/stream-error')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  streamError(@Param('id', ParseIntPipe) id: number): Observable<number[]> {
    return interval(10).pipe(
      take(2),
      toArray(),
      concatMap(() => from(this.probe.checkpoint(`stream:${id}`))),
      concatMap(() =>
        throwError(
          () => new UnprocessableEntityException(`Stream ${id} failed`),
        ),
      ),
    );
  }

  /** Declared Observable, but the handler throws before building it. */
  @Post(':id/stream-throws')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  streamThrows(@Param('id', ParseIntPipe) id: number): Observable<never> {
    throw new NotFoundException(`Stream ${id} does not exist`);
  }

  /** Returns an Observable without declaring it: the lock is still held until it completes. */
  @Post(':id/stream-undeclared')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  streamUndeclared(@Param('id', ParseIntPipe) id: number): unknown {
    return interval(10).pipe(
      take(3),
      toArray(),
      concatMap((ticks) =>
        from(this.probe.checkpoint(`stream:${id}`)).pipe(map(() => ticks)),
      ),
    );
  }

  /** A string parameter without a pipe: the user chooses the whole value. */
  @Post('code/:code')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  async byCode(@Param('code') code: string) {
    await this.probe.checkpoint(`code:${code}`);
    return { code, keys: heldKeys() };
  }

  @Post('admin/:id')
  @DistributedLock('coupon:<0>:admin', { waitTime: 0 })
  async admin(@Param('id') id: string) {
    await this.probe.checkpoint(`admin:${id}`);
    return { id, keys: heldKeys() };
  }
}

/**
 * The coupon id taken from other parts of the request, each put whole into a
 * scalar placeholder: `coupon:[object Object]`, `coupon:undefined` and
 * friends must never be locked.
 */
@Controller('coupon-from')
export class CouponInputController {
  @Post('body')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  byBody(@Body() body: unknown) {
    return { body, keys: heldKeys() };
  }

  @Post('query')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  byQuery(@Query('id') id?: string) {
    return { id, keys: heldKeys() };
  }

  @Post('header')
  @DistributedLock('coupon:<0>', { waitTime: 0 })
  byHeader(@Headers('couponid') id?: string) {
    return { id, keys: heldKeys() };
  }
}

export interface OrderBody {
  userId?: unknown;
}

export interface CartBody {
  items: Array<{ sku: string }>;
}

function cartKeys(body: CartBody): string[] {
  return body.items.map((item) => `sku:${item.sku}`);
}

@Controller('keys')
export class KeysController {
  constructor(
    private readonly probe: Probe,
    private readonly locks: LockService,
  ) {}

  @Post('orders')
  @DistributedLock('order:<0.userId>', { waitTime: 0 })
  async order(@Body() body: OrderBody) {
    await this.probe.checkpoint(`order:${String(body.userId)}`);
    return { keys: heldKeys() };
  }

  @Post('profile')
  @DistributedLock('user:<0>', { waitTime: 0 })
  async profile(@Headers('userid') userId: string) {
    await this.probe.checkpoint(`user:${userId}`);
    return { keys: heldKeys() };
  }

  @Post('seats/:show/:seat')
  @DistributedLock('seat:<0>:<1>', { waitTime: 0 })
  async seat(
    @Param('show') show: string,
    @Param('seat', ParseIntPipe) seat: number,
  ) {
    await this.probe.checkpoint(`seat:${show}:${seat}`);
    return { keys: heldKeys() };
  }

  @Post('transfer/:from/:to')
  @DistributedLock(['account:<0>', 'account:<1>'], { waitTime: 0 })
  async transfer(@Param('from') source: string, @Param('to') target: string) {
    const locked = {
      [source]: await this.locks.isLocked(`account:${source}`),
      [target]: await this.locks.isLocked(`account:${target}`),
    };
    await this.probe.checkpoint(`transfer:${source}:${target}`);
    return { keys: heldKeys(), locked };
  }

  @Post('cart')
  @DistributedLock(cartKeys, { waitTime: 0 })
  async cart(@Body() body: CartBody) {
    await this.probe.checkpoint(`cart:${body.items.length}`);
    return { keys: heldKeys() };
  }
}

/**
 * The same route decorators with `@DistributedLock` on top of the stack
 * (applied last) and at the bottom (applied first, right on the method).
 */
@Controller('decorators')
export class DecoratorOrderController {
  @DistributedLock('above:<0>', { waitTime: 0 })
  @Post('above/:id')
  @UseGuards(DenyGuard)
  @HttpCode(202)
  @Header('x-handled-by', 'above')
  @ApiOperation({ summary: 'Lock declared above @Post' })
  @ApiResponse({ status: 202, description: 'Accepted above' })
  above(@Param('id') id: string) {
    return { id, keys: heldKeys() };
  }

  @Post('below/:id')
  @UseGuards(DenyGuard)
  @HttpCode(202)
  @Header('x-handled-by', 'below')
  @ApiOperation({ summary: 'Lock declared below @Post' })
  @ApiResponse({ status: 202, description: 'Accepted below' })
  @DistributedLock('below:<0>', { waitTime: 0 })
  below(@Param('id') id: string) {
    return { id, keys: heldKeys() };
  }
}

export const allControllers: Type[] = [
  CouponController,
  CouponInputController,
  KeysController,
  DecoratorOrderController,
];

export interface HttpAppOptions {
  readonly adapter: HttpAdapterName;
  readonly redisUrl: string;
  readonly lockOptions?: Omit<DistributedLockModuleOptions, 'redis'>;
  readonly controllers?: Type[];
}

export interface HttpApp {
  readonly app: INestApplication;
  readonly probe: Probe;
  readonly locks: LockService;
  /** `http://127.0.0.1:<port>` of the listening app. */
  readonly url: string;
  /** A supertest agent on the listening app. */
  http(): ReturnType<typeof request>;
  close(): Promise<void>;
}

/** Starts a Nest app on Express or Fastify that imports DistributedLockModule, listening on a free port. */
export async function createHttpApp(options: HttpAppOptions): Promise<HttpApp> {
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: options.redisUrl,
        ...options.lockOptions,
      }),
    ],
    controllers: options.controllers ?? allControllers,
    providers: [Probe, DenyGuard],
  })
  // oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
  class HttpTestModule {}

  const settings = { logger: false as const, abortOnError: false };
  const app: INestApplication =
    options.adapter === 'express'
      ? await NestFactory.create(HttpTestModule, new ExpressAdapter(), settings)
      : await NestFactory.create<NestFastifyApplication>(
          HttpTestModule,
          new FastifyAdapter(),
          settings,
        );
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    app,
    probe: app.get(Probe),
    locks: app.get(LockService),
    url,
    http: () => request(url),
    close: () => app.close(),
  };
}

const wakeList = /^lock:wake:[\w-]+$/;

/**
 * Records every command Redis runs (MONITOR), including the commands run
 * inside Lua scripts, so a test can check which keys were touched.
 */
export class RedisMonitor {
  readonly commands: string[][] = [];

  private constructor(
    private readonly monitor: Redis,
    private readonly control: Redis,
  ) {
    monitor.on('monitor', (_time: string, args: string[]) => {
      this.commands.push(args);
    });
  }

  static async start(url: string): Promise<RedisMonitor> {
    const control = new Redis(url);
    const monitor = await openMonitor(control);
    return new RedisMonitor(monitor, control);
  }

  /** Waits until every command sent to Redis before this call has been seen. */
  async sync(): Promise<void> {
    const marker = `monitor-sync-${Math.random().toString(36).slice(2)}`;
    await this.control.echo(marker);
    await eventually(
      () => this.commands.some((args) => args.includes(marker)),
      5_000,
      'MONITOR catching up',
    );
  }

  /**
   * Arguments of the recorded commands that name a lock key (`lock:...`),
   * leaving out the backend's wake lists (`lock:wake:<id>`), which are no lock.
   */
  lockKeys(): string[] {
    return this.commands
      .flat()
      .filter((arg) => arg.startsWith('lock:') && !wakeList.test(arg));
  }

  /** How many Lua scripts (the lock verbs) ran. */
  scriptsRun(): number {
    return this.commands.filter(([command]) => /^eval/i.test(command)).length;
  }

  clear(): void {
    this.commands.length = 0;
  }

  async stop(): Promise<void> {
    this.monitor.disconnect();
    this.control.disconnect();
  }
}
type Response = request.Response;

interface SendInit {
  readonly tag?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: object;
}

/** POSTs to `path`; the request starts at once, the promise resolves with the response. */
function send(app: HttpApp, path: string, init: SendInit = {}) {
  let test = app.http().post(path);
  if (init.tag !== undefined) test = test.set('x-tag', init.tag);
  for (const [name, value] of Object.entries(init.headers ?? {})) {
    test = test.set(name, value);
  }
  if (init.body !== undefined) test = test.send(init.body);
  return test.then((response) => response);
}

const busyBody = (key: string) => ({
  statusCode: 409,
  error: 'Conflict',
  message: expect.any(String),
  code: 'LOCK_NOT_ACQUIRED',
  key,
});

const invalidKeyBody = {
  statusCode: 400,
  error: 'Bad Request',
  message: expect.any(String),
  code: 'LOCK_KEY_INVALID',
};

/**
 * The HTTP end-to-end suite of `@DistributedLock`, run once per platform
 * adapter against a private `redis-server`.
 */
export function defineHttpLockSuite(adapter: HttpAdapterName): void {
  describe(`@DistributedLock over HTTP (${adapter})`, () => {
    let server: RedisServerHandle;
    let redis: Redis;
    let h: HttpApp;

    beforeAll(async () => {
      server = await startRedisServer();
      redis = new Redis(server.url);
      h = await createHttpApp({ adapter, redisUrl: server.url });
    });

    afterEach(() => {
      h.probe.reset();
    });

    afterAll(async () => {
      await h?.close();
      redis?.disconnect();
      await server?.stop();
    });

    describe('one lock per coupon', () => {
      it('answers one of two concurrent requests 201 and the other 409 with Retry-After', async () => {
        const release = h.probe.hold('coupon:7');
        const first = send(h, '/coupons/7', { tag: 'a' });
        await h.probe.entered('coupon:7', 'a');
        expect(await h.locks.isLocked('coupon:7')).toBe(true);

        const second = await send(h, '/coupons/7', { tag: 'b' });
        expect(second.status).toBe(409);
        expect(second.body).toEqual(busyBody('coupon:7'));
        expect(second.headers['retry-after']).toBe('1');
        expect(second.headers['content-type']).toMatch(/application\/json/);

        release();
        const firstResponse = await first;
        expect(firstResponse.status).toBe(201);
        expect(firstResponse.body).toEqual({ id: 7, keys: ['coupon:7'] });
        expect(h.probe.events).toEqual(['enter coupon:7 a', 'exit coupon:7 a']);
        // The wrapper releases before the response is written.
        expect(await h.locks.isLocked('coupon:7')).toBe(false);
      });

      it('runs requests for different ids in parallel', async () => {
        const releaseOne = h.probe.hold('coupon:1');
        const releaseTwo = h.probe.hold('coupon:2');
        const one = send(h, '/coupons/1');
        const two = send(h, '/coupons/2');
        // Both handlers are inside at the same time.
        await h.probe.entered('coupon:1');
        await h.probe.entered('coupon:2');
        expect(h.probe.events.filter((e) => e.startsWith('exit'))).toEqual([]);
        releaseOne();
        releaseTwo();
        expect((await one).status).toBe(201);
        expect((await two).status).toBe(201);
      });

      it('queues the second request when the route has a waitTime', async () => {
        const release = h.probe.hold('coupon:8');
        const first = send(h, '/coupons/8/queued', { tag: 'a' });
        await h.probe.entered('coupon:8', 'a');
        const second = send(h, '/coupons/8/queued', { tag: 'b' });
        // The second request is waiting in the lock's queue, not in the handler.
        await eventually(
          async () => (await redis.llen('lock:{coupon:8}:queue')) === 1,
          5_000,
          'the second request queuing',
        );
        expect(h.probe.events).toEqual(['enter coupon:8 a']);

        release();
        const [firstResponse, secondResponse] = await Promise.all([
          first,
          second,
        ]);
        expect(firstResponse.status).toBe(201);
        expect(secondResponse.status).toBe(201);
        expect(secondResponse.body).toEqual({ id: 8, keys: ['coupon:8'] });
        expect(h.probe.events).toEqual([
          'enter coupon:8 a',
          'exit coupon:8 a',
          'enter coupon:8 b',
          'exit coupon:8 b',
        ]);
      });
    });

    describe('route metadata survives the decorator', () => {
      it.each(['above', 'below'])(
        'serves a route with @DistributedLock %s @Post, with @HttpCode and @Header',
        async (position) => {
          const response = await send(h, `/decorators/${position}/1`);
          expect(response.status).toBe(202);
          expect(response.headers['x-handled-by']).toBe(position);
          expect(response.body).toEqual({
            id: '1',
            keys: [`${position}:1`],
          });
        },
      );

      it.each(['above', 'below'])(
        'keeps @UseGuards with @DistributedLock %s @Post, and the guard runs before the lock',
        async (position) => {
          const denied = await send(h, `/decorators/${position}/2`, {
            headers: { 'x-deny': '1' },
          });
          expect(denied.status).toBe(403);
          expect(denied.body).toMatchObject({ statusCode: 403 });

          // With the lock taken elsewhere, a denied request still gets 403, not 409.
          const held = await h.locks.acquire(`${position}:2`);
          try {
            const deniedWhileHeld = await send(h, `/decorators/${position}/2`, {
              headers: { 'x-deny': '1' },
            });
            expect(deniedWhileHeld.status).toBe(403);
            const busy = await send(h, `/decorators/${position}/2`);
            expect(busy.status).toBe(409);
            expect(busy.body).toEqual(busyBody(`${position}:2`));
          } finally {
            await held.release();
          }
        },
      );

      it('keeps Swagger @ApiOperation and @ApiResponse readable from the handler', () => {
        const reflector = h.app.get(Reflector);
        const { prototype } = DecoratorOrderController;
        for (const [handler, position] of [
          [prototype.above, 'above'],
          [prototype.below, 'below'],
        ] as const) {
          expect(reflector.get(DECORATORS.API_OPERATION, handler)).toEqual({
            summary: `Lock declared ${position} @Post`,
          });
          expect(Reflect.getMetadata(DECORATORS.API_RESPONSE, handler)).toEqual(
            { '202': { description: `Accepted ${position}` } },
          );
          // And the lock's own metadata sits next to them.
          expect(
            Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, handler),
          ).toMatchObject({ keys: { description: `${position}:<0>` } });
        }
      });

      it('lists both routes in the generated OpenAPI document', () => {
        const document = SwaggerModule.createDocument(
          h.app,
          new DocumentBuilder().setTitle('locks').build(),
        );
        for (const position of ['above', 'below']) {
          const operation = document.paths[`/decorators/${position}/{id}`]
            ?.post as
            | { summary?: string; responses?: Record<string, unknown> }
            | undefined;
          expect(operation?.summary).toBe(`Lock declared ${position} @Post`);
          expect(operation?.responses).toHaveProperty('202');
        }
      });
    });

    describe('keys built from what the handler receives', () => {
      it('locks order:<0.userId> from @Body()', async () => {
        const release = h.probe.hold('order:u1');
        const first = send(h, '/keys/orders', { body: { userId: 'u1' } });
        await h.probe.entered('order:u1');

        const busy = await send(h, '/keys/orders', { body: { userId: 'u1' } });
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('order:u1'));
        const other = await send(h, '/keys/orders', { body: { userId: 42 } });
        expect(other.status).toBe(201);
        expect(other.body).toEqual({ keys: ['order:42'] });

        release();
        expect((await first).body).toEqual({ keys: ['order:u1'] });
      });

      it("locks user:<0> from @Headers('userid')", async () => {
        const release = h.probe.hold('user:alice');
        const first = send(h, '/keys/profile', {
          headers: { userid: 'alice' },
        });
        await h.probe.entered('user:alice');

        const busy = await send(h, '/keys/profile', {
          headers: { userid: 'alice' },
        });
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('user:alice'));
        const other = await send(h, '/keys/profile', {
          headers: { userid: 'bob' },
        });
        expect(other.body).toEqual({ keys: ['user:bob'] });

        release();
        expect((await first).body).toEqual({ keys: ['user:alice'] });
      });

      it('fills several placeholders: seat:<0>:<1>', async () => {
        const release = h.probe.hold('seat:gala:12');
        const first = send(h, '/keys/seats/gala/12');
        await h.probe.entered('seat:gala:12');

        // ParseIntPipe ran first: "012" is the same seat as "12".
        const busy = await send(h, '/keys/seats/gala/012');
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('seat:gala:12'));
        const neighbour = await send(h, '/keys/seats/gala/13');
        expect(neighbour.status).toBe(201);
        expect(neighbour.body).toEqual({ keys: ['seat:gala:13'] });

        release();
        expect((await first).body).toEqual({ keys: ['seat:gala:12'] });
      });

      it('holds every key of an array of templates inside the handler', async () => {
        const release = h.probe.hold('transfer:a:b');
        const first = send(h, '/keys/transfer/a/b');
        await h.probe.entered('transfer:a:b');
        expect(await h.locks.isLocked('account:a')).toBe(true);
        expect(await h.locks.isLocked('account:b')).toBe(true);

        // b -> c needs account:b: refused, and account:c is not left behind.
        const busy = await send(h, '/keys/transfer/b/c');
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('account:b'));
        expect(await h.locks.isLocked('account:c')).toBe(false);

        release();
        const response = await first;
        expect(response.status).toBe(201);
        expect(response.body).toEqual({
          keys: ['account:a', 'account:b'],
          locked: { a: true, b: true },
        });
        expect(await h.locks.isLocked('account:a')).toBe(false);
        expect(await h.locks.isLocked('account:b')).toBe(false);
      });

      it('uses the keys a key function returns', async () => {
        const release = h.probe.hold('cart:2');
        const first = send(h, '/keys/cart', {
          body: { items: [{ sku: 'B2' }, { sku: 'A1' }] },
        });
        await h.probe.entered('cart:2');

        const busy = await send(h, '/keys/cart', {
          body: { items: [{ sku: 'B2' }] },
        });
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('sku:B2'));
        const other = await send(h, '/keys/cart', {
          body: { items: [{ sku: 'C3' }] },
        });
        expect(other.body).toEqual({ keys: ['sku:C3'] });

        release();
        // Held in canonical (sorted) order.
        expect((await first).body).toEqual({ keys: ['sku:A1', 'sku:B2'] });
      });
    });

    describe('keys come from the arguments after pipes, never the raw request', () => {
      let monitor: RedisMonitor;

      beforeAll(async () => {
        monitor = await RedisMonitor.start(server.url);
      });

      beforeEach(async () => {
        await redis.flushall();
        await monitor.sync();
        monitor.clear();
      });

      afterAll(async () => {
        await monitor?.stop();
      });

      const invalid: Array<[string, string, SendInit]> = [
        ['a body without the field', '/keys/orders', { body: {} }],
        ['a null body field', '/keys/orders', { body: { userId: null } }],
        ['an empty body field', '/keys/orders', { body: { userId: '' } }],
        [
          'an object body field',
          '/keys/orders',
          { body: { userId: { secret: 'hunter2' } } },
        ],
        ['no body at all', '/keys/orders', {}],
        ['an array body field', '/keys/orders', { body: { userId: [1, 2] } }],
        ['a missing header', '/keys/profile', {}],
        ['an empty header', '/keys/profile', { headers: { userid: '' } }],
        ['the whole body in <0>', '/coupon-from/body', { body: { id: 7 } }],
        ['a missing query parameter', '/coupon-from/query', {}],
        ['an empty query parameter', '/coupon-from/query?id=', {}],
        ['a repeated query parameter', '/coupon-from/query?id=1&id=2', {}],
        ['a missing header in <0>', '/coupon-from/header', {}],
        ['a key function that throws', '/keys/cart', { body: { basket: [] } }],
        [
          'a value making the key too long',
          '/keys/profile',
          { headers: { userid: 'x'.repeat(600) } },
        ],
      ];

      it.each(invalid)(
        'answers 400 LOCK_KEY_INVALID for %s and writes nothing to Redis',
        async (_case, path, init) => {
          const response = await send(h, path, init);
          expect(response.status).toBe(400);
          expect(response.body).toEqual(invalidKeyBody);
          // The message names the template, never the user's value.
          expect(response.body.message).toMatch(/template|key function/);
          expect(response.body.message).not.toContain('hunter2');
          expect(response.body.message).not.toContain('xxxxxxxxxx');
          expect(h.probe.events).toEqual([]);

          // Not even an attempt reached Redis.
          await monitor.sync();
          expect(monitor.lockKeys()).toEqual([]);
          expect(monitor.scriptsRun()).toBe(0);
          expect(await redis.keys('*')).toEqual([]);
        },
      );

      it('lets ParseIntPipe reject a bad id before any lock is tried', async () => {
        const response = await send(h, '/coupons/abc');
        expect(response.status).toBe(400);
        expect(response.body).toMatchObject({
          statusCode: 400,
          error: 'Bad Request',
        });
        expect(response.body).not.toHaveProperty('code');
        await monitor.sync();
        expect(monitor.lockKeys()).toEqual([]);
        expect(monitor.scriptsRun()).toBe(0);
        expect(await redis.keys('*')).toEqual([]);
      });

      it('only ever locks well-formed coupon keys for valid requests', async () => {
        const release = h.probe.hold('coupon:1');
        const held = send(h, '/coupons/1');
        await h.probe.entered('coupon:1');
        const responses = await Promise.all([
          send(h, '/coupons/1'), // 409
          send(h, '/coupons/2'),
          send(h, '/coupons/003'),
          send(h, '/coupons/4/stream'),
          send(h, '/coupon-from/query?id=5'),
          send(h, '/coupon-from/header', { headers: { couponid: '6' } }),
        ]);
        const queued = send(h, '/coupons/1/queued');
        await eventually(
          async () => (await redis.llen('lock:{coupon:1}:queue')) === 1,
          5_000,
          'a queued request',
        );
        release();
        responses.push(await held, await queued);
        expect(responses.map((response) => response.status).toSorted()).toEqual(
          [201, 201, 201, 201, 201, 201, 201, 409],
        );

        await monitor.sync();
        const keys = monitor.lockKeys();
        expect(keys.length).toBeGreaterThan(0);
        for (const key of keys) {
          expect(key).toMatch(
            /^lock:\{coupon:\d+\}(?::fence|:queue|:bypass)?$/,
          );
          expect(key).not.toMatch(/undefined|object|null/i);
        }
        const locked = new Set(
          keys.map((key) => /^lock:\{coupon:\d+\}/.exec(key)?.[0]),
        );
        expect([...locked].toSorted()).toEqual(
          [1, 2, 3, 4, 5, 6].map((id) => `lock:{coupon:${id}}`),
        );
      });
    });

    describe('user values are encoded', () => {
      it("locks 1:admin as coupon:1%3Aadmin, apart from 'coupon:<0>:admin' with 1", async () => {
        const releaseCode = h.probe.hold('code:1:admin');
        const releaseAdmin = h.probe.hold('admin:1');
        const byCode = send(
          h,
          `/coupons/code/${encodeURIComponent('1:admin')}`,
        );
        const admin = send(h, '/coupons/admin/1');
        // Both hold their lock at the same time: the keys do not collide.
        await h.probe.entered('code:1:admin');
        await h.probe.entered('admin:1');
        expect(await redis.exists('lock:{coupon:1%3Aadmin}')).toBe(1);
        expect(await redis.exists('lock:{coupon:1:admin}')).toBe(1);

        releaseCode();
        releaseAdmin();
        const [codeResponse, adminResponse] = await Promise.all([
          byCode,
          admin,
        ]);
        expect(codeResponse.status).toBe(201);
        expect(codeResponse.body).toEqual({
          code: '1:admin',
          keys: ['coupon:1%3Aadmin'],
        });
        expect(adminResponse.status).toBe(201);
        expect(adminResponse.body).toEqual({
          id: '1',
          keys: ['coupon:1:admin'],
        });
      });

      it('keeps braces of a user value out of the Redis hash tag', async () => {
        const response = await send(
          h,
          `/coupons/code/${encodeURIComponent('{7}')}`,
        );
        expect(response.status).toBe(201);
        expect(response.body).toEqual({
          code: '{7}',
          keys: ['coupon:%7B7%7D'],
        });
      });
    });

    describe('Observable handlers', () => {
      it('holds the lock until a declared Observable completes', async () => {
        const release = h.probe.hold('stream:3');
        const stream = send(h, '/coupons/3/stream');
        await h.probe.entered('stream:3');
        expect(await h.locks.isLocked('coupon:3')).toBe(true);
        const busy = await send(h, '/coupons/3');
        expect(busy.status).toBe(409);
        expect(busy.body).toEqual(busyBody('coupon:3'));
        // The same stream route, refused while the first stream runs.
        const busyStream = await send(h, '/coupons/3/stream');
        expect(busyStream.status).toBe(409);
        expect(busyStream.body).toEqual(busyBody('coupon:3'));
        expect(busyStream.headers['retry-after']).toBe('1');

        release();
        const response = await stream;
        expect(response.status).toBe(201);
        expect(response.body).toEqual([0, 1, 2, 3, 4]);
        await eventually(
          async () => !(await h.locks.isLocked('coupon:3')),
          5_000,
          'coupon:3 released',
        );
        expect((await send(h, '/coupons/3')).status).toBe(201);
      });

      it('releases the lock when the stream errors, with the error status', async () => {
        const release = h.probe.hold('stream:4');
        const stream = send(h, '/coupons/4/stream-error');
        await h.probe.entered('stream:4');
        expect(await h.locks.isLocked('coupon:4')).toBe(true);
        expect((await send(h, '/coupons/4')).status).toBe(409);

        release();
        const response = await stream;
        expect(response.status).toBe(422);
        expect(response.body).toMatchObject({
          statusCode: 422,
          message: 'Stream 4 failed',
        });
        await eventually(
          async () => !(await h.locks.isLocked('coupon:4')),
          5_000,
          'coupon:4 released',
        );
        expect((await send(h, '/coupons/4')).status).toBe(201);
      });

      it('holds the lock for an Observable returned without being declared', async () => {
        const release = h.probe.hold('stream:5');
        const stream = send(h, '/coupons/5/stream-undeclared');
        await h.probe.entered('stream:5');
        expect((await send(h, '/coupons/5')).status).toBe(409);

        release();
        const response = await stream;
        expect(response.status).toBe(201);
        expect(response.body).toEqual([0, 1, 2]);
        await eventually(
          async () => !(await h.locks.isLocked('coupon:5')),
          5_000,
          'coupon:5 released',
        );
      });
    });

    describe('errors thrown by the handler', () => {
      it('releases the lock when an Observable handler throws before returning', async () => {
        const response = await send(h, '/coupons/10/stream-throws');
        expect(response.status).toBe(404);
        expect(response.body).toEqual({
          statusCode: 404,
          error: 'Not Found',
          message: 'Stream 10 does not exist',
        });
        await eventually(
          async () => !(await h.locks.isLocked('coupon:10')),
          5_000,
          'coupon:10 released',
        );
        expect((await send(h, '/coupons/10')).status).toBe(201);
      });

      it('passes an HttpException through and releases the lock', async () => {
        const release = h.probe.hold('coupon:9');
        const failing = send(h, '/coupons/9/not-found');
        await h.probe.entered('coupon:9', 'not-found');
        expect((await send(h, '/coupons/9')).status).toBe(409);

        release();
        const response = await failing;
        expect(response.status).toBe(404);
        expect(response.body).toEqual({
          statusCode: 404,
          error: 'Not Found',
          message: 'Coupon 9 does not exist',
        });
        expect(await h.locks.isLocked('coupon:9')).toBe(false);
        expect((await send(h, '/coupons/9')).status).toBe(201);
      });
    });

    describe('Redis unreachable', () => {
      let downServer: RedisServerHandle;
      let down: HttpApp;

      beforeAll(async () => {
        downServer = await startRedisServer();
        down = await createHttpApp({
          adapter,
          redisUrl: downServer.url,
          lockOptions: { commandTimeout: 500 },
          controllers: [CouponController],
        });
      });

      afterAll(async () => {
        await downServer?.restart();
        await down?.close();
        await downServer?.stop();
      });

      it('answers 503 with Retry-After quickly, and recovers once Redis is back', async () => {
        expect((await send(down, '/coupons/5')).status).toBe(201);
        await downServer.stop();

        // A Promise handler, its second try, and an Observable handler.
        for (const path of ['/coupons/5', '/coupons/5', '/coupons/5/stream']) {
          const startedAt = Date.now();
          const response = await send(down, path);
          expect(Date.now() - startedAt).toBeLessThan(3_000);
          expect(response.status).toBe(503);
          expect(response.body).toEqual({
            statusCode: 503,
            error: 'Service Unavailable',
            message: expect.any(String),
            code: 'LOCK_BACKEND_UNAVAILABLE',
          });
          expect(response.body.message).not.toContain(String(downServer.port));
          expect(response.headers['retry-after']).toBe('1');
        }
        expect(down.probe.events).toEqual([
          'enter coupon:5 -',
          'exit coupon:5 -',
        ]);

        await downServer.restart();
        let last: Response | undefined;
        await eventually(
          async () => {
            last = await send(down, '/coupons/5');
            return last.status === 201;
          },
          10_000,
          'a request succeeding after the restart',
        );
        expect(last?.body).toEqual({ id: 5, keys: ['coupon:5'] });
      });
    });

    const configured = (
      lockOptions: Omit<DistributedLockModuleOptions, 'redis'>,
    ) => {
      const app = { current: undefined as HttpApp | undefined };
      beforeAll(async () => {
        app.current = await createHttpApp({
          adapter,
          redisUrl: server.url,
          lockOptions,
          controllers: [CouponController, CouponInputController],
        });
      });
      afterAll(async () => {
        await app.current?.close();
      });
      /** A 'busy' answer: the request while another holds coupon:<id>. */
      return {
        app: () => app.current!,
        busy: async (id: number) => {
          const target = app.current!;
          const release = target.probe.hold(`coupon:${id}`);
          const first = send(target, `/coupons/${id}`);
          try {
            await target.probe.entered(`coupon:${id}`);
            return await send(target, `/coupons/${id}`);
          } finally {
            release();
            expect((await first).status).toBe(201);
          }
        },
      };
    };

    describe('configurable error mapping', () => {
      describe('statuses and a fixed Retry-After', () => {
        const config = configured({
          statuses: { notAcquired: 429, invalidKey: 422 },
          retryAfter: 7,
        });

        it('answers busy with 429 and Retry-After: 7', async () => {
          const response = await config.busy(11);
          expect(response.status).toBe(429);
          expect(response.body).toEqual({
            ...busyBody('coupon:11'),
            statusCode: 429,
            error: 'Too Many Requests',
          });
          expect(response.headers['retry-after']).toBe('7');
        });

        it('answers a bad key with the configured 422', async () => {
          const response = await send(config.app(), '/coupon-from/query');
          expect(response.status).toBe(422);
          expect(response.body).toEqual({
            ...invalidKeyBody,
            statusCode: 422,
            error: 'Unprocessable Entity',
          });
        });
      });

      describe('retryAfter: false', () => {
        const config = configured({ retryAfter: false });

        it('sends no Retry-After header', async () => {
          const response = await config.busy(12);
          expect(response.status).toBe(409);
          expect(response.body).toEqual(busyBody('coupon:12'));
          expect(response.headers).not.toHaveProperty('retry-after');
        });
      });

      describe('mapError', () => {
        const seen: Array<{ code: string; type: string }> = [];
        const config = configured({
          mapError: (error, context) => {
            seen.push({ code: error.code, type: context.getType() });
            if (!(error instanceof LockNotAcquiredError)) return undefined;
            return new HttpException(
              { statusCode: 423, reason: 'locked', resource: error.key },
              423,
            );
          },
        });

        it('throws the HttpException mapError returns', async () => {
          const response = await config.busy(13);
          expect(response.status).toBe(423);
          expect(response.body).toEqual({
            statusCode: 423,
            reason: 'locked',
            resource: 'coupon:13',
          });
          // The retry hint survives a custom body.
          expect(response.headers['retry-after']).toBe('1');
          expect(seen).toContainEqual({
            code: 'LOCK_NOT_ACQUIRED',
            type: 'http',
          });
        });

        it('falls back to the default mapping when mapError returns undefined', async () => {
          const response = await send(config.app(), '/coupon-from/query');
          expect(response.status).toBe(400);
          expect(response.body).toEqual(invalidKeyBody);
          expect(seen).toContainEqual({
            code: 'LOCK_KEY_INVALID',
            type: 'http',
          });
        });
      });
    });

    describe('startup errors', () => {
      it('rejects a malformed template when the class is defined, naming class, method and template', () => {
        expect(defineMalformedTemplateController).toThrow(LockTemplateError);
        const error = templateErrorOf(defineMalformedTemplateController);
        expect(error).toMatchObject({
          code: 'LOCK_TEMPLATE_INVALID',
          className: 'MalformedTemplateController',
          methodName: 'buy',
          template: 'coupon:<0',
        });
        expect(error.message).toContain('MalformedTemplateController.buy');
        expect(error.message).toContain('"coupon:<0"');
      });

      it('rejects <2> on a method that takes one parameter', () => {
        expect(defineOutOfRangeController).toThrow(LockTemplateError);
        const error = templateErrorOf(defineOutOfRangeController);
        expect(error).toMatchObject({
          className: 'OutOfRangeController',
          methodName: 'buy',
          template: 'coupon:<2>',
        });
        expect(error.message).toContain('OutOfRangeController.buy');
        expect(error.message).toContain('coupon:<2>');
        expect(error.message).toMatch(/<2>.*takes 1/);
      });
    });
  });
}

/** Defines (and so decorates) a controller whose lock template is malformed. */
function defineMalformedTemplateController() {
  @Controller('broken')
  class MalformedTemplateController {
    @Post(':id')
    @DistributedLock('coupon:<0')
    buy(@Param('id') id: string) {
      return id;
    }
  }
  return MalformedTemplateController;
}

/** Defines a controller whose template reads an argument the method does not take. */
function defineOutOfRangeController() {
  @Controller('broken')
  class OutOfRangeController {
    @Post(':id')
    @DistributedLock('coupon:<2>')
    buy(@Param('id') id: string) {
      return id;
    }
  }
  return OutOfRangeController;
}

function templateErrorOf(define: () => unknown): LockTemplateError {
  try {
    define();
  } catch (error) {
    expect(error).toBeInstanceOf(LockTemplateError);
    return error as LockTemplateError;
  }
  throw new Error('defining the controller did not throw');
}
