import {
  isRedisOlderThan,
  oldestSupportedRedis,
  warnIfRedisTooOld,
} from '../../src/backends/redis/redis-version-check.js';
import type { RedisServerHandle } from '../../../../test/support/redis-server.js';
import {
  connect,
  disconnectClients,
  ready,
  startPolicyServers,
} from './eviction-policy-fixtures.js';

/**
 * warnIfRedisTooOld: the lock scripts need Redis 6.2 (SET ... GET). Every
 * server here is a real Redis 7; an older one is stood in for by raising the
 * minimum the check compares with.
 */

let servers: Awaited<ReturnType<typeof startPolicyServers>>;
let redis: RedisServerHandle;
const fakeLogger = () => ({ warn: vi.fn(), debug: vi.fn() });

beforeAll(async () => {
  servers = await startPolicyServers();
  redis = servers.switchable;
});

afterEach(() => disconnectClients());

afterAll(async () => {
  const { allkeys, noeviction, switchable, noConfig } = servers;
  await Promise.all(
    [allkeys, noeviction, switchable, noConfig].map((server) => server?.stop()),
  );
});

describe('isRedisOlderThan', () => {
  it.each([
    ['6.0.16', true],
    ['6.1.9', true],
    ['5.0.7', true],
    ['6.2.0', false],
    ['6.2.14', false],
    ['7.0.15', false],
    ['10.0.0', false],
  ])('%s against 6.2.0: %s', (version, older) => {
    expect(isRedisOlderThan(version, oldestSupportedRedis)).toBe(older);
  });
});

describe('warnIfRedisTooOld', () => {
  it('says nothing about a server new enough', async () => {
    const logger = fakeLogger();
    await warnIfRedisTooOld(await ready(connect(redis.url)), logger, {
      timeoutMs: 2_000,
    });
    expect(logger.warn).not.toHaveBeenCalled();
    expect(logger.debug).not.toHaveBeenCalled();
  });

  it('warns about a server older than the minimum, naming its version and the fix', async () => {
    const client = await ready(connect(redis.url));
    const version = /^redis_version:(\S+)/m.exec(
      await client.info('server'),
    )?.[1];
    const logger = fakeLogger();
    await warnIfRedisTooOld(client, logger, {
      timeoutMs: 2_000,
      minimum: '99.0.0',
    });
    expect(logger.warn).toHaveBeenCalledTimes(1);
    const [message] = logger.warn.mock.calls[0] as [string];
    expect(message).toContain(`Redis ${version} is older than 99.0.0`);
    expect(message).toContain('Upgrade Redis');
  });

  it('leaves a client that is not connected yet alone', async () => {
    const client = connect(redis.url, { lazyConnect: true });
    const logger = fakeLogger();
    await warnIfRedisTooOld(client, logger, {
      timeoutMs: 2_000,
      minimum: '99.0.0',
    });
    expect(client.status).toBe('wait');
    expect(logger.warn).not.toHaveBeenCalled();
  });

  it('gives up with a debug line when the server refuses INFO', async () => {
    const logger = fakeLogger();
    await warnIfRedisTooOld(
      await ready(connect(servers.restrictedUrl)),
      logger,
      { timeoutMs: 2_000, minimum: '99.0.0' },
    );
    expect(logger.warn).not.toHaveBeenCalled();
    expect(logger.debug).toHaveBeenCalledWith(
      expect.stringContaining('Could not read the Redis version'),
    );
  });
});
