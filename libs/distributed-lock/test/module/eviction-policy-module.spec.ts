import { Logger } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockService,
  MemoryLockBackend,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import {
  connect,
  disconnectClients,
  ready,
  startPolicyServers,
} from './eviction-policy-fixtures.js';

/**
 * DistributedLockModule checks the eviction policy of the Redis it uses, once,
 * without holding up startup. The check itself:
 * eviction-policy-check.spec.ts.
 */

let allkeys: RedisServerHandle;
let noeviction: RedisServerHandle;
let switchable: RedisServerHandle;
let noConfig: RedisServerHandle;
let restrictedUrl: string;

const apps = new Set<TestingModule>();

/** Compiles and initialises an app with the module; closed after the test. */
async function startApp(
  options: DistributedLockModuleOptions,
): Promise<TestingModule> {
  const app = await Test.createTestingModule({
    imports: [DistributedLockModule.forRoot(options)],
  }).compile();
  apps.add(app);
  await app.init();
  return app;
}

let warn: ReturnType<typeof spyOnLogger>['warn'];
let debug: ReturnType<typeof spyOnLogger>['debug'];

function spyOnLogger() {
  return {
    warn: vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => {}),
    debug: vi.spyOn(Logger.prototype, 'debug').mockImplementation(() => {}),
  };
}

/** The eviction warnings Nest's Logger printed (not the module's connection errors). */
const evictionWarnings = () =>
  warn.mock.calls
    .map(([message]) => String(message))
    .filter((message) => message.includes('maxmemory-policy'));

/** Waits until every CONFIG call made so far has been answered and acted on. */
async function configAnswered(
  config: ReturnType<typeof spyOnConfig>,
): Promise<void> {
  await eventually(() => config.mock.calls.length > 0, 5_000);
  await Promise.allSettled(config.mock.results.map((result) => result.value));
  await sleep(20);
}

const spyOnConfig = () => vi.spyOn(Redis.prototype, 'config');

beforeAll(async () => {
  ({ allkeys, noeviction, switchable, noConfig, restrictedUrl } =
    await startPolicyServers());
});

beforeEach(() => {
  ({ warn, debug } = spyOnLogger());
});

afterEach(async () => {
  await Promise.all([...apps].map((app) => app.close().catch(() => {})));
  apps.clear();
  disconnectClients();
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.all(
    [allkeys, noeviction, switchable, noConfig].map((server) => server?.stop()),
  );
});

describe('DistributedLockModule', () => {
  it('warns once, with context DistributedLock, for an ioredis client it is given', async () => {
    const client = await ready(connect(allkeys.url));
    const config = spyOnConfig();

    await startApp({ redis: client });
    await configAnswered(config);
    expect(evictionWarnings()).toHaveLength(1);
    expect(evictionWarnings()[0]).toContain('maxmemory-policy is allkeys-lru');
    const logger = warn.mock.contexts[0] as unknown as { context?: string };
    expect(logger.context).toBe('DistributedLock');

    // Not again on a reconnect, nor for a second app on the same client.
    client.disconnect(true);
    await eventually(() => client.status === 'ready');
    await startApp({ redis: client });
    await sleep(200);
    expect(config).toHaveBeenCalledTimes(1);
    expect(evictionWarnings()).toHaveLength(1);
  });

  it('warns once for a connection it opens, without holding up startup', async () => {
    const sleeper = connect(allkeys.url);
    await ready(sleeper);
    const config = spyOnConfig();

    // Redis is stalled for a second: startup goes on, the warning comes later.
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '1');
    await sleep(50);
    const startedAt = Date.now();
    const app = await startApp({ redis: allkeys.url });
    // Well before the stall ends (compiling the app is in this time too).
    expect(Date.now() - startedAt).toBeLessThan(900);
    expect(evictionWarnings()).toHaveLength(0);

    await sleeping;
    await configAnswered(config);
    expect(evictionWarnings()).toHaveLength(1);
    // The locks work as usual.
    const handle = await app.get(LockService).acquire('evict:1');
    expect(await handle.release()).toBe(true);
    expect(evictionWarnings()).toHaveLength(1);
  });

  it('does not warn under noeviction', async () => {
    const config = spyOnConfig();
    await startApp({ redis: noeviction.url });
    await configAnswered(config);
    expect(config).toHaveBeenCalledTimes(1);
    expect(evictionWarnings()).toHaveLength(0);
  });

  it('warns from INFO when the server has CONFIG disabled', async () => {
    await startApp({ redis: noConfig.url });
    await eventually(() => evictionWarnings().length > 0);
    expect(evictionWarnings()).toHaveLength(1);
    expect(evictionWarnings()[0]).toContain('maxmemory-policy is allkeys-lru');
    expect(debug).not.toHaveBeenCalled();
  });

  it('starts and locks as usual, without warning, when the policy cannot be read', async () => {
    const app = await startApp({
      redis: { url: restrictedUrl, enableReadyCheck: false },
    });
    await eventually(() => debug.mock.calls.length > 0);
    expect(String(debug.mock.calls[0]?.[0])).toContain(
      'Could not read Redis maxmemory-policy',
    );
    expect(evictionWarnings()).toHaveLength(0);
    const handle = await app.get(LockService).acquire('evict:2');
    expect(await handle.release()).toBe(true);
  });

  it('checks nothing when given a custom backend', async () => {
    const config = spyOnConfig();
    const info = vi.spyOn(Redis.prototype, 'info');
    await startApp({ backend: new MemoryLockBackend() });
    await sleep(100);
    expect(config).not.toHaveBeenCalled();
    expect(info).not.toHaveBeenCalled();
    expect(evictionWarnings()).toHaveLength(0);
    expect(debug).not.toHaveBeenCalled();
  });

  it('starts while Redis is down and checks once it is up', async () => {
    const server = await startRedisServer({
      extraArgs: ['--maxmemory-policy', 'allkeys-lru'],
    });
    try {
      await server.stop();
      const startedAt = Date.now();
      await startApp({ redis: server.url });
      expect(Date.now() - startedAt).toBeLessThan(2_000);
      await sleep(100);
      expect(evictionWarnings()).toHaveLength(0);

      await server.restart();
      await eventually(() => evictionWarnings().length > 0, 10_000);
      // A later reconnect does not check again.
      await server.restart();
      const observer = await ready(connect(server.url));
      await eventually(
        async () =>
          String(await observer.client('LIST')).split('\n').length > 2,
        10_000,
      );
      await sleep(100);
      expect(evictionWarnings()).toHaveLength(1);
    } finally {
      await Promise.all([...apps].map((app) => app.close().catch(() => {})));
      apps.clear();
      await server.stop();
    }
  });
});
