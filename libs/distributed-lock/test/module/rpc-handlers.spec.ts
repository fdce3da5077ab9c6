/**
 * @DistributedLock on microservice handlers: @MessagePattern and @EventPattern
 * in a microservice, a hybrid app, and the errors an RPC caller gets.
 */
import {
  Controller,
  type INestApplication,
  type INestMicroservice,
} from '@nestjs/common';
import {
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  Payload,
  Transport,
  type ClientProxy,
  type MicroserviceOptions,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { firstValueFrom, lastValueFrom, type Observable } from 'rxjs';
import {
  clearAllButSessions,
  keysButSessions,
} from '../../../../test/support/clear-keys.js';
import {
  DistributedLock,
  DistributedLockModule,
  LockService,
  currentLock,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { getFreePort } from '../../../../test/support/ports.js';
import { useModuleServer } from './module-server-fixture.js';
import { gate } from './module-helpers.js';

const fixture = useModuleServer(clearAllButSessions);

const stored = async (key: string) =>
  (await fixture.observer.exists(`lock:{${key}}`)) === 1;

interface BuyRequest {
  readonly couponId?: number;
}

@Controller()
class CouponController {
  buyGate = gate();
  eventGate = gate();
  eventsInside = 0;
  maxEventsInside = 0;
  readonly events: Array<{
    orderId: number;
    lockedInside: boolean;
    keys?: readonly string[];
  }> = [];

  constructor(private readonly locks: LockService) {}

  @MessagePattern('buy')
  @DistributedLock('coupon:<0.couponId>', { waitTime: 0 })
  async buy(
    @Payload() request: BuyRequest,
  ): Promise<{ bought?: number; fencingToken?: number }> {
    await this.buyGate.promise;
    return {
      bought: request.couponId,
      fencingToken: await currentLock()?.fence(),
    };
  }

  // Placed above the pattern decorator on purpose: its metadata must survive.
  @DistributedLock('audit:<0.orderId>')
  @EventPattern('order.created')
  async onOrderCreated(@Payload() event: { orderId: number }): Promise<void> {
    this.maxEventsInside = Math.max(this.maxEventsInside, ++this.eventsInside);
    this.events.push({
      orderId: event.orderId,
      lockedInside: await this.locks.isLocked(`audit:${event.orderId}`),
      keys: currentLock()?.keys,
    });
    await this.eventGate.promise;
    this.eventsInside--;
  }
}

type RpcSetup = 'createNestMicroservice' | 'connectMicroservice';

interface RpcApp {
  readonly close: () => Promise<void>;
  readonly client: ClientProxy;
  readonly controller: CouponController;
  readonly locks: LockService;
}

async function startRpcApp(
  setup: RpcSetup,
  inheritAppConfig = true,
): Promise<RpcApp> {
  const port = await getFreePort();
  const transport = {
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port },
  } as const;
  const moduleRef = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot({ redis: fixture.server.url })],
    controllers: [CouponController],
  }).compile();
  let app: INestMicroservice | INestApplication;
  if (setup === 'createNestMicroservice') {
    const microservice =
      moduleRef.createNestMicroservice<MicroserviceOptions>(transport);
    await microservice.listen();
    app = microservice;
  } else {
    const http = moduleRef.createNestApplication({ logger: false });
    http.connectMicroservice<MicroserviceOptions>(transport, {
      inheritAppConfig,
    });
    await http.init();
    await http.startAllMicroservices();
    app = http;
  }
  const client = ClientProxyFactory.create(transport);
  await client.connect();
  return {
    client,
    controller: moduleRef.get(CouponController),
    locks: moduleRef.get(LockService),
    close: async () => {
      client.close();
      await app.close();
    },
  };
}

/** What the client's observable errors with, or undefined when it succeeds. */
async function rpcError(call: Observable<unknown>): Promise<unknown> {
  return firstValueFrom(call).then(
    () => undefined,
    (error: unknown) => error,
  );
}

describe.each<RpcSetup>(['createNestMicroservice', 'connectMicroservice'])(
  'microservice handlers over TCP (%s)',
  (setup) => {
    let rpc: RpcApp;

    beforeAll(async () => {
      rpc = await startRpcApp(setup);
    });

    afterAll(async () => {
      await rpc?.close();
    });

    beforeEach(() => {
      rpc.controller.buyGate = gate();
      rpc.controller.eventGate = gate();
    });

    it('lets one of two concurrent calls in; the other gets a 409 RPC error', async () => {
      const { client, controller } = rpc;
      const calls = [1, 2].map(() =>
        firstValueFrom(client.send('buy', { couponId: 7 })),
      );
      // The loser fails at once (waitTime 0) while the winner waits at the gate.
      const first = await Promise.race(
        calls.map((call) =>
          call.then(
            (value: unknown) => ({ value }),
            (error: unknown) => ({ error }),
          ),
        ),
      );
      expect(first).toEqual({
        error: {
          statusCode: 409,
          error: 'Conflict',
          code: 'LOCK_NOT_ACQUIRED',
          key: 'coupon:7',
          message: expect.stringContaining('coupon:7') as string,
        },
      });
      expect(await stored('coupon:7')).toBe(true);

      controller.buyGate.open();
      const outcomes = await Promise.allSettled(calls);
      const fulfilled = outcomes.filter((o) => o.status === 'fulfilled');
      expect(fulfilled).toHaveLength(1);
      expect(fulfilled[0]).toMatchObject({ value: { bought: 7 } });
      expect(await stored('coupon:7')).toBe(false);
    });

    it('answers a missing key value with a LOCK_KEY_INVALID RPC error', async () => {
      rpc.controller.buyGate.open();
      const error = await rpcError(rpc.client.send('buy', {}));
      expect(error).toMatchObject({
        statusCode: 400,
        code: 'LOCK_KEY_INVALID',
      });
      expect(await keysButSessions(fixture.observer)).toEqual([]);
    });

    it('holds the lock while an @EventPattern handler runs, one at a time per key', async () => {
      const { client, controller, locks } = rpc;
      controller.events.length = 0;
      controller.maxEventsInside = 0;

      await lastValueFrom(client.emit('order.created', { orderId: 5 }), {
        defaultValue: undefined,
      });
      await lastValueFrom(client.emit('order.created', { orderId: 5 }), {
        defaultValue: undefined,
      });
      await eventually(() => controller.events.length === 1);
      expect(controller.events[0]).toEqual({
        orderId: 5,
        lockedInside: true,
        keys: ['audit:5'],
      });
      expect(await locks.isLocked('audit:5')).toBe(true);
      // The second event waits for the first to finish.
      await sleep(100);
      expect(controller.events).toHaveLength(1);

      controller.eventGate.open();
      await eventually(() => controller.events.length === 2);
      await eventually(async () => !(await locks.isLocked('audit:5')));
      expect(controller.maxEventsInside).toBe(1);
    });
  },
);

// Nest applies global enhancers (the module registers the interceptor with
// APP_INTERCEPTOR) to a hybrid app's microservice only with inheritAppConfig;
// the README says so. The lock itself still holds without it.
describe('a hybrid app without inheritAppConfig', () => {
  it('still excludes concurrent handlers, but answers with the transport default error', async () => {
    const rpc = await startRpcApp('connectMicroservice', false);
    try {
      const holder = await rpc.locks.acquire('coupon:9');
      const error = await rpcError(rpc.client.send('buy', { couponId: 9 }));
      await holder.release();
      expect(error).toMatchObject({
        status: 'error',
        message: 'Internal server error',
      });
      expect(error).not.toHaveProperty('code');
    } finally {
      await rpc.close();
    }
  });
});
