/**
 * The module's connections to servers that ask for a password, an ACL user
 * or TLS, and its bound on calls to a server that stops answering.
 */
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockBackendError,
  LockService,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import { timed, useAppContexts, within } from './module-helpers.js';

const { start, stop } = useAppContexts();

/** Acquires and releases through a module on `options`, checking the key with `check`. */
async function roundTrip(
  options: DistributedLockModuleOptions,
  check: Redis,
): Promise<void> {
  try {
    const app = await start({
      imports: [DistributedLockModule.forRoot(options)],
    });
    const locks = app.get(LockService);
    const handle = await locks.acquire('secure:1');
    expect(await check.exists('lock:{secure:1}')).toBe(1);
    expect(await handle.release()).toBe(true);
    expect(await check.exists('lock:{secure:1}')).toBe(0);
    await within(stop(app), 5_000, 'app.close()');
  } finally {
    check.disconnect();
  }
}

describe('authenticated and TLS connections', () => {
  let passwordServer: RedisServerHandle;
  let aclServer: RedisServerHandle;
  let tlsServer: RedisServerHandle;

  beforeAll(async () => {
    [passwordServer, aclServer, tlsServer] = await Promise.all([
      startRedisServer({ password: 's3cret' }),
      startRedisServer({ aclUser: { name: 'locker', password: 'l0cker' } }),
      startRedisServer({ tls: true }),
    ]);
  });

  afterAll(async () => {
    await Promise.all(
      [passwordServer, aclServer, tlsServer].map((handle) => handle?.stop()),
    );
  });

  it('connects with the default user password in the URL', async () => {
    expect(passwordServer.url).toMatch(/^redis:\/\/:s3cret@127\.0\.0\.1:/);
    await roundTrip(
      { redis: passwordServer.url },
      new Redis(passwordServer.url),
    );
  });

  it('connects as an ACL user', async () => {
    expect(aclServer.url).toMatch(/^redis:\/\/locker:l0cker@127\.0\.0\.1:/);
    await roundTrip({ redis: aclServer.url }, new Redis(aclServer.url));
  });

  it('connects over TLS with the CA given in the options', async () => {
    expect(tlsServer.url).toMatch(/^rediss:\/\/127\.0\.0\.1:/);
    const tls = { ca: tlsServer.tlsCa };
    await roundTrip(
      { redis: { url: tlsServer.url, tls } },
      new Redis(tlsServer.url, { tls }),
    );
  });

  it('fails acquire with LockBackendError, in bounded time, on a wrong password', async () => {
    const app = await start({
      imports: [
        DistributedLockModule.forRoot({
          redis: `redis://:wrong@127.0.0.1:${passwordServer.port}`,
          commandTimeout: 500,
        }),
      ],
    });
    const locks = app.get(LockService);

    const outcome = await timed(locks.acquire('secure:2'));
    expect(outcome.error).toBeInstanceOf(LockBackendError);
    expect(outcome.elapsedMs).toBeLessThan(500 + 1_500);
    const closing = await timed(within(stop(app), 5_000, 'app.close()'));
    expect(closing.error).toBeUndefined();
  });
});

describe('commandTimeout', () => {
  it('bounds a call when the server stops answering', async () => {
    const paused = await startRedisServer();
    try {
      const app = await start({
        imports: [
          DistributedLockModule.forRoot({
            redis: paused.url,
            commandTimeout: 300,
          }),
        ],
      });
      const locks = app.get(LockService);
      await (await locks.acquire('paused:1')).release();

      const pid = paused.pid();
      if (pid === undefined) throw new Error('redis-server is not running');
      process.kill(pid, 'SIGSTOP');
      try {
        const acquiring = await timed(locks.acquire('paused:2'));
        expect(acquiring.error).toBeInstanceOf(LockBackendError);
        expect(acquiring.elapsedMs).toBeGreaterThanOrEqual(250);
        expect(acquiring.elapsedMs).toBeLessThan(300 + 1_500);

        const checking = await timed(locks.isLocked('paused:1'));
        expect(checking.error).toBeInstanceOf(LockBackendError);
        expect(checking.elapsedMs).toBeLessThan(300 + 1_500);

        // Shutting down while Redis hangs must not hang the app.
        const closing = await timed(within(stop(app), 3_000, 'app.close()'));
        expect(closing.error).toBeUndefined();
      } finally {
        process.kill(pid, 'SIGCONT');
      }
    } finally {
      await paused.stop();
    }
  });
});
