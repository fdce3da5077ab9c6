import { Logger } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  LockService,
  MemoryLockBackend,
  type DistributedLockModuleOptions,
} from '@app/distributed-lock';
import { warnIfLocksCanBeEvicted } from '../../src/backends/redis/eviction-policy-check.js';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

/** allkeys-lru, with DEBUG SLEEP to play a slow server. */
let allkeys: RedisServerHandle;
let noeviction: RedisServerHandle;
/** Each test sets the policy it needs. */
let switchable: RedisServerHandle;
/**
 * allkeys-lru with CONFIG disabled, as on many managed services, and a user
 * who may not run INFO either, so cannot read the policy at all.
 */
let noConfig: RedisServerHandle;
let restrictedUrl: string;

const clients = new Set<Redis>();
const apps = new Set<TestingModule>();

/** A client closed after the test. */
function connect(url: string, options: { lazyConnect?: boolean } = {}): Redis {
  const client = new Redis(url, {
    ...options,
    // ioredis's ready check runs INFO, which complains for the restricted user.
    enableReadyCheck: false,
  });
  client.on('error', () => undefined);
  clients.add(client);
  return client;
}

async function ready(client: Redis): Promise<Redis> {
  await client.ping();
  return client;
}

const fakeLogger = () => ({ warn: vi.fn(), debug: vi.fn() });

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
  [allkeys, noeviction, switchable, noConfig] = await Promise.all([
    startRedisServer({
      extraArgs: [
        '--maxmemory-policy',
        'allkeys-lru',
        '--enable-debug-command',
        'local',
      ],
    }),
    startRedisServer({ extraArgs: ['--maxmemory-policy', 'noeviction'] }),
    startRedisServer(),
    startRedisServer({
      extraArgs: [
        '--maxmemory-policy',
        'allkeys-lru',
        '--rename-command',
        'CONFIG',
        '',
        '--user',
        'restricted',
        'on',
        '>secret',
        '~*',
        '&*',
        '+@all',
        '-info',
      ],
    }),
  ]);
  restrictedUrl = `redis://restricted:secret@${noConfig.host}:${noConfig.port}`;
});

beforeEach(() => {
  ({ warn, debug } = spyOnLogger());
});

afterEach(async () => {
  await Promise.all([...apps].map((app) => app.close().catch(() => {})));
  apps.clear();
  for (const client of clients) client.disconnect();
  clients.clear();
  vi.restoreAllMocks();
});

afterAll(async () => {
  await Promise.all(
    [allkeys, noeviction, switchable, noConfig].map((server) => server?.stop()),
  );
});

describe('warnIfLocksCanBeEvicted', () => {
  it.each([
    'allkeys-lru',
    'allkeys-lfu',
    'allkeys-random',
    'volatile-lru',
    'volatile-lfu',
    'volatile-random',
    'volatile-ttl',
  ])(
    'warns under %s, naming the policy, the risk and the fix',
    async (policy) => {
      const admin = connect(switchable.url);
      await admin.config('SET', 'maxmemory-policy', policy);
      const logger = fakeLogger();

      await warnIfLocksCanBeEvicted(
        await ready(connect(switchable.url)),
        logger,
      );

      expect(logger.warn).toHaveBeenCalledTimes(1);
      const [message] = logger.warn.mock.calls[0] as [string];
      expect(message).toContain(`maxmemory-policy is ${policy}`);
      expect(message).toContain('acquire that lock while its holder');
      expect(message).toContain('Set maxmemory-policy noeviction');
      expect(message).toContain('separate Redis');
      expect(message.includes('every lock key has one')).toBe(
        policy.startsWith('volatile-'),
      );
      expect(logger.debug).not.toHaveBeenCalled();
    },
  );

  it('stays quiet under noeviction', async () => {
    const logger = fakeLogger();
    await warnIfLocksCanBeEvicted(await ready(connect(noeviction.url)), logger);
    expect(logger.warn).not.toHaveBeenCalled();
    expect(logger.debug).not.toHaveBeenCalled();
  });

  it('checks a client once, however often it is asked and reconnects', async () => {
    const client = await ready(connect(allkeys.url));
    const logger = fakeLogger();

    await Promise.all([
      warnIfLocksCanBeEvicted(client, logger),
      warnIfLocksCanBeEvicted(client, logger),
    ]);
    client.disconnect(true);
    await eventually(() => client.status === 'ready');
    await ready(client);
    await warnIfLocksCanBeEvicted(client, logger);

    expect(logger.warn).toHaveBeenCalledTimes(1);
    // Another client of the same server is checked on its own.
    await warnIfLocksCanBeEvicted(await ready(connect(allkeys.url)), logger);
    expect(logger.warn).toHaveBeenCalledTimes(2);
  });

  it('waits for the client to be ready rather than connecting it', async () => {
    const client = connect(allkeys.url, { lazyConnect: true });
    const logger = fakeLogger();

    const check = warnIfLocksCanBeEvicted(client, logger);
    await sleep(100);
    expect(client.status).toBe('wait');
    expect(logger.warn).not.toHaveBeenCalled();

    await client.connect();
    await check;
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it('gives up without a word when aborted before the client is ready', async () => {
    const client = connect(allkeys.url, { lazyConnect: true });
    const logger = fakeLogger();
    const controller = new AbortController();

    const check = warnIfLocksCanBeEvicted(client, logger, {
      signal: controller.signal,
    });
    controller.abort();
    await check;
    await client.connect();
    await sleep(100);
    expect(logger.warn).not.toHaveBeenCalled();
    expect(logger.debug).not.toHaveBeenCalled();

    // Never checked, so a later check of the client still runs.
    await warnIfLocksCanBeEvicted(client, logger);
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  it('reads the policy from INFO when CONFIG is refused', async () => {
    const client = await ready(connect(noConfig.url));
    await expect(client.config('GET', 'maxmemory-policy')).rejects.toThrow(
      /unknown command/,
    );
    const logger = fakeLogger();

    await warnIfLocksCanBeEvicted(client, logger);

    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.warn.mock.calls[0]?.[0]).toContain(
      'maxmemory-policy is allkeys-lru',
    );
  });

  it('stays quiet, with a debug line, when the policy cannot be read', async () => {
    const logger = fakeLogger();

    await expect(
      warnIfLocksCanBeEvicted(await ready(connect(restrictedUrl)), logger),
    ).resolves.toBeUndefined();

    expect(logger.warn).not.toHaveBeenCalled();
    expect(logger.debug).toHaveBeenCalledTimes(1);
    expect(logger.debug.mock.calls[0]?.[0]).toMatch(
      /^Could not read Redis maxmemory-policy.*unknown command.*NOPERM/,
    );
  });

  it('gives up after timeoutMs when Redis does not answer, and ignores a late answer', async () => {
    const client = await ready(connect(allkeys.url));
    const sleeper = connect(allkeys.url);
    const logger = fakeLogger();
    // Blocks the whole server for a second.
    const sleeping = sleeper.call('DEBUG', 'SLEEP', '1');
    await sleep(50);

    const startedAt = Date.now();
    await warnIfLocksCanBeEvicted(client, logger, { timeoutMs: 200 });
    const elapsed = Date.now() - startedAt;

    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(800);
    expect(logger.debug).toHaveBeenCalledTimes(1);
    expect(logger.debug.mock.calls[0]?.[0]).toContain(
      'no answer within 200 ms',
    );
    await sleeping;
    await client.ping(); // the CONFIG reply came before this one
    expect(logger.warn).not.toHaveBeenCalled();
  });
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
