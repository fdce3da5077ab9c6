import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockNotAcquiredError,
  LockService,
  MemoryLockBackend,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import { runTs } from '../../../../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { otherConnections, useAppContexts, within } from './module-helpers.js';

let server: RedisServerHandle;
let observer: Redis;
const connectionCount = async (redis: Redis = observer) =>
  (await otherConnections(redis)).length;

beforeAll(async () => {
  server = await startRedisServer();
  observer = new Redis(server.url);
});

afterEach(async () => {
  await observer.flushall();
});

// Registered after the flush: hooks run last-registered first, so the apps a
// test left open are closed before Redis is flushed.
const { start, stop } = useAppContexts();

afterAll(async () => {
  observer.disconnect();
  await server.stop();
});

/** Stands for a configuration module (like @nestjs/config) exporting a token. */
const APP_CONFIG = Symbol('APP_CONFIG');
interface AppConfig {
  readonly url: string;
}

@Module({
  providers: [
    {
      provide: APP_CONFIG,
      useFactory: async (): Promise<AppConfig> => ({ url: server.url }),
    },
  ],
  exports: [APP_CONFIG],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class ConfigLikeModule {}

@Injectable()
class FeatureService {
  constructor(readonly locks: LockService) {}
}

/** A feature module that injects LockService without importing DistributedLockModule. */
@Module({ providers: [FeatureService], exports: [FeatureService] })
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
class FeatureModule {}

describe('forRoot / forRootAsync', () => {
  it('forRoot({ redis: url }) gives a LockService storing keys as lock:{key}', async () => {
    const app = await start({
      imports: [DistributedLockModule.forRoot({ redis: server.url })],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:1');
    expect(await observer.exists('lock:{order:1}')).toBe(1);
    expect(await locks.isLocked('order:1')).toBe(true);
    expect(await handle.release()).toBe(true);
    expect(await observer.exists('lock:{order:1}')).toBe(0);
  });

  it('forRootAsync reads the URL from an injected config provider', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRootAsync({
          imports: [ConfigLikeModule],
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({ redis: config.url }),
        }),
      ],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:2');
    expect(await observer.exists('lock:{order:2}')).toBe(1);
    await handle.release();
    expect(await observer.exists('lock:{order:2}')).toBe(0);
  });

  it('keyPrefix changes the stored key', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({ redis: server.url, keyPrefix: 'app:' }),
      ],
    });
    const locks = app.get(LockService);

    const handle = await locks.acquire('order:3');
    expect(await observer.exists('app:{order:3}')).toBe(1);
    expect(await observer.exists('lock:{order:3}')).toBe(0);
    await handle.release();
    expect(await observer.exists('app:{order:3}')).toBe(0);
  });
});

describe('isGlobal', () => {
  it('lets a feature module that does not import the module inject LockService', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({ redis: server.url, isGlobal: true }),
        FeatureModule,
      ],
    });
    const { locks } = app.get(FeatureService);
    expect(locks).toBe(app.get(LockService));

    const handle = await locks.acquire('feature:1');
    expect(await observer.exists('lock:{feature:1}')).toBe(1);
    await handle.release();
  });

  it('works with forRootAsync too', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRootAsync({
          isGlobal: true,
          imports: [ConfigLikeModule],
          inject: [APP_CONFIG],
          useFactory: (config: AppConfig) => ({ redis: config.url }),
        }),
        FeatureModule,
      ],
    });
    expect(app.get(FeatureService).locks).toBe(app.get(LockService));
  });

  it('without isGlobal, such a feature module fails to compile', async () => {
    // The in-memory backend: the failed compile leaves no connection behind.
    const compiling = Test.createTestingModule({
      imports: [
        DistributedLockModule.forRoot({ backend: new MemoryLockBackend() }),
        FeatureModule,
      ],
    }).compile();
    await expect(compiling).rejects.toThrow(/FeatureService.*LockService/s);
  });
});

describe('connection ownership and shutdown', () => {
  it('opens its own connections for a URL and closes all of them on close', async () => {
    // Connections of earlier tests' apps may take a moment to go.
    await eventually(async () => (await connectionCount()) === 0);
    const app = await start({
      imports: [DistributedLockModule.forRoot({ redis: server.url })],
    });
    const locks = app.get(LockService);
    await locks.acquire('conn:a');
    await locks.acquire('conn:b');
    expect(await connectionCount()).toBe(1);

    // Waiters block on one wake-list connection per process, however many.
    const waiters = ['conn:a', 'conn:b'].map((key) =>
      locks.acquire(key, { waitTime: 10_000 }).then(
        () => 'acquired',
        (error: unknown) => error,
      ),
    );
    await eventually(async () => (await connectionCount()) === 2);
    await sleep(100);
    expect(await connectionCount()).toBe(2);

    // Close without releasing: waiters give up, every connection goes.
    await within(stop(app), 5_000, 'app.close()');
    for (const outcome of await Promise.all(waiters)) {
      expect(outcome).toBeInstanceOf(LockNotAcquiredError);
    }
    await eventually(async () => (await connectionCount()) === 0, 3_000);
  });

  it('uses a given ioredis client as is and leaves it open on close', async () => {
    const client = new Redis(server.url);
    try {
      await client.ping();
      await eventually(async () => (await connectionCount()) === 1);
      const before = await otherConnections(observer);
      const app = await start({
        imports: [DistributedLockModule.forRoot({ redis: client })],
      });
      const locks = app.get(LockService);

      await locks.acquire('given:busy');
      expect(await client.exists('lock:{given:busy}')).toBe(1);
      // No connection of its own, only the wake-list one once someone waits.
      expect(await otherConnections(observer)).toEqual(before);
      const waiter = locks.acquire('given:busy', { waitTime: 10_000 }).then(
        () => 'acquired',
        (error: unknown) => error,
      );
      await eventually(
        async () => (await connectionCount()) === before.length + 1,
      );

      await within(stop(app), 5_000, 'app.close()');
      expect(await waiter).toBeInstanceOf(LockNotAcquiredError);
      expect(client.status).toBe('ready');
      expect(await client.ping()).toBe('PONG');
      await eventually(
        async () => (await connectionCount()) === before.length,
        3_000,
      );
      expect(await otherConnections(observer)).toEqual(before);
    } finally {
      client.disconnect();
    }
  });

  it('on close, lets the session lapse under a lock still held, and ends an idle one at once', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({ redis: server.url, sessionTtl: 600 }),
      ],
    });
    const closing = app.get(LockService);
    const lost: string[] = [];
    closing.events.on('lost', (event) => lost.push(event.reason));
    const handle = await closing.acquire('bound');
    // The session is renewed every 200 ms: still held well past its 600 ms TTL.
    await sleep(900);
    const other = await start({
      imports: [DistributedLockModule.forRoot({ redis: server.url })],
    });
    const locks = other.get(LockService);
    expect(await locks.isLocked('bound')).toBe(true);

    // A handler may still run under the lock: it keeps it until the session,
    // no longer renewed, lapses.
    await stop(app);
    const closedAt = Date.now();
    const [session] = await observer.keys('lock:session:*');
    expect(await observer.pttl(session)).toBeLessThanOrEqual(600);
    expect(handle.lost).toBe(false);
    await eventually(async () => !(await locks.isLocked('bound')), 2_000);
    expect(Date.now() - closedAt).toBeLessThan(1_600);
    // Told, as ever, before anyone else could have the lock.
    expect(handle.lost).toBe(true);
    expect(handle.signal.aborted).toBe(true);
    expect(lost).toEqual(['session-expired']);
    const taken = await locks.acquire('bound', { waitTime: 0 });
    expect(await taken.fence()).toBeGreaterThan(0);
    await taken.release();

    // Nothing held: the session ends with the app.
    await stop(other);
    expect(await observer.keys('lock:session:*')).toEqual([]);
  });

  it('stops renewing on close: an unreleased watchdog lock runs out its lease', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: server.url,
          sessionTtl: false,
          watchdogLeaseTime: 600,
        }),
      ],
    });
    const locks = app.get(LockService);
    await locks.acquire('renewed');
    // Renewed every 200 ms: still held well past its 600 ms lease.
    await sleep(900);
    expect(await observer.exists('lock:{renewed}')).toBe(1);

    await stop(app);
    const first = await observer.pttl('lock:{renewed}');
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(600);
    await sleep(250);
    const second = await observer.pttl('lock:{renewed}');
    expect(second === -2 || second < first).toBe(true);
    await eventually(
      async () => (await observer.exists('lock:{renewed}')) === 0,
      2_000,
    );
  });

  it('leaves nothing that keeps the process alive after close', async () => {
    const worker =
      'libs/distributed-lock/test/module/fixtures/close-then-exit.ts';
    const stdout = await runTs(worker, [server.url], 20_000);
    const exitedAt = Date.now();
    const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as {
      closedAt: number;
      waiter: string;
      fencingToken: number;
    };
    expect(report.waiter).toBe('LockNotAcquiredError');
    expect(report.fencingToken).toBeGreaterThan(0);
    // It exits by itself soon after close (a leaked connection would keep it
    // running until runTs kills it); generous bound for a loaded machine.
    expect(exitedAt - report.closedAt).toBeLessThan(5_000);
    await eventually(async () => (await connectionCount()) === 0, 2_000);
    // The held lock is bound to the app's session, left to lapse: nobody
    // renews it any more.
    const holder = await observer.get('lock:{worker:held}');
    const sessionId = /^([\w-]+)\./.exec(holder ?? '')?.[1];
    expect(sessionId).toBeDefined();
    const pttl = await observer.pttl(`lock:session:{${sessionId}}`);
    expect(pttl).toBeLessThanOrEqual(5_000);
  });
});

describe('option validation', () => {
  it.each([
    ['negative waitTime', { waitTime: -1 }, /waitTime/],
    ['keyPrefix with braces', { keyPrefix: 'app:{tenant}:' }, /keyPrefix/],
    ['commandTimeout 0', { commandTimeout: 0 }, /commandTimeout/],
    ['negative localHandoffs', { localHandoffs: -1 }, /localHandoffs/],
    ['fractional localHandoffs', { localHandoffs: 1.5 }, /localHandoffs/],
    [
      'negative localHandoffWindow',
      { localHandoffWindow: -1 },
      /localHandoffWindow/,
    ],
    [
      'cluster together with redis',
      { cluster: [{ host: '127.0.0.1', port: 1 }] },
      /either cluster or redis/,
    ],
    ['sessionTtl below 300 ms', { sessionTtl: 100 }, /sessionTtl/],
    [
      'freeOnDisconnect with sessions off',
      { freeOnDisconnect: true, sessionTtl: false },
      /freeOnDisconnect needs .* not sessionTtl: false/,
    ],
    [
      'freeOnDisconnect on a quorum',
      {
        freeOnDisconnect: true,
        nodes: [
          'redis://127.0.0.1:1',
          'redis://127.0.0.1:2',
          'redis://127.0.0.1:3',
        ],
      },
      /freeOnDisconnect needs .* not nodes|either nodes/,
    ],
    [
      'replicaAcks on a quorum',
      {
        replicaAcks: { replicas: 1 },
        nodes: [
          'redis://127.0.0.1:1',
          'redis://127.0.0.1:2',
          'redis://127.0.0.1:3',
        ],
      },
      /replicaAcks|nodes/,
    ],
  ] as const)(
    'rejects %s at startup with a RangeError',
    async (_name, options, message) => {
      const compiling = Test.createTestingModule({
        imports: [
          DistributedLockModule.forRoot({ redis: server.url, ...options }),
        ],
      }).compile();
      const error = await compiling.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(RangeError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toMatch(/DistributedLockModule/);
    },
  );

  it('rejects bad options from forRootAsync at startup too', async () => {
    const compiling = Test.createTestingModule({
      imports: [
        DistributedLockModule.forRootAsync({
          useFactory: async () => ({ redis: server.url, waitTime: -5 }),
        }),
      ],
    }).compile();
    await expect(compiling).rejects.toThrow(RangeError);
  });
});
