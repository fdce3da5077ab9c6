import { warnIfLocksCanBeEvicted } from '../../src/backends/redis/eviction-policy-check.js';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import type { RedisServerHandle } from '../../../../test/support/redis-server.js';
import {
  connect,
  disconnectClients,
  ready,
  startPolicyServers,
} from './eviction-policy-fixtures.js';

/**
 * warnIfLocksCanBeEvicted on its own: which policies it warns about, how it
 * reads the policy, and when it gives up. The module's use of it:
 * eviction-policy-module.spec.ts.
 */

let allkeys: RedisServerHandle;
let noeviction: RedisServerHandle;
let switchable: RedisServerHandle;
let noConfig: RedisServerHandle;
let restrictedUrl: string;

const fakeLogger = () => ({ warn: vi.fn(), debug: vi.fn() });

beforeAll(async () => {
  ({ allkeys, noeviction, switchable, noConfig, restrictedUrl } =
    await startPolicyServers());
});

afterEach(() => {
  disconnectClients();
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
