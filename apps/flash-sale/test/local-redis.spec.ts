import { Logger } from '@nestjs/common';
import { getFreePort } from '../../../test/support/ports.js';
import { loadConfig, mergeConfig } from '../src/config/app-config.js';
import {
  findRedisServerBinary,
  startOrReuseLocalRedis,
} from '../src/redis/local-redis-server.js';
import { pingRedis } from '../src/redis/redis-client.js';
import { resolveRedis } from '../src/redis/resolve-redis.js';

const quiet = new Logger('test');
quiet.log = () => undefined;

describe('finding Redis at startup', () => {
  it('fails fast, saying how to get Redis, when REDIS_URL does not answer', async () => {
    const port = await getFreePort();
    const config = mergeConfig(loadConfig({}), {
      redisUrl: `redis://:secret@127.0.0.1:${port}`,
    });

    const error = await resolveRedis(config, quiet).catch((e: Error) => e);

    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/REDIS_URL.*does not answer/);
    expect((error as Error).message).toMatch(/apt-get install -y redis-server/);
    expect((error as Error).message).not.toContain('secret');
  });

  it('fails fast when nothing answers and the local fallback is off', async () => {
    const port = await getFreePort();
    const config = mergeConfig(loadConfig({}), {
      localRedis: { enabled: false },
    });

    await expect(
      resolveRedis(config, quiet, `redis://127.0.0.1:${port}`),
    ).rejects.toThrow(/LOCAL_REDIS=0.*Start Redis/s);
  });

  it('starts a local redis-server when nothing answers, which a second instance reuses', async () => {
    const [deadPort, localPort] = await Promise.all([
      getFreePort(),
      getFreePort(),
    ]);
    const config = mergeConfig(loadConfig({}), {
      localRedis: { enabled: true, port: localPort },
    });
    const logs: string[] = [];
    const logger = new Logger('test');
    logger.log = (message: unknown) => void logs.push(String(message));

    const first = await resolveRedis(
      config,
      logger,
      `redis://127.0.0.1:${deadPort}`,
    );
    const second = await resolveRedis(
      config,
      logger,
      `redis://127.0.0.1:${deadPort}`,
    );
    try {
      expect(first.url).toBe(`redis://127.0.0.1:${localPort}`);
      expect(second.url).toBe(first.url);
      expect(logs[0]).toMatch(/started a local redis-server/);
      expect(logs[1]).toMatch(/another instance started/);
      expect(await pingRedis(first.url, 1_000)).toBeUndefined();
      await second.close(); // not its server: stays up
      expect(await pingRedis(first.url, 1_000)).toBeUndefined();
    } finally {
      await first.close();
    }
    expect(await pingRedis(first.url, 500)).toBeInstanceOf(Error);
  });

  it('finds the redis-server binary', () => {
    expect(findRedisServerBinary()).toMatch(/redis-server$/);
    expect(findRedisServerBinary({ PATH: '/nonexistent' })).toMatch(
      /^\/usr\/(local\/)?s?bin\/redis-server$|^\/opt\//,
    );
  });

  it('reports a server that exits instead of starting', async () => {
    const port = await getFreePort();
    // /bin/false stands in for a redis-server that fails at once.
    await expect(
      startOrReuseLocalRedis('/bin/false', port, 2_000),
    ).rejects.toThrow(/Could not start \/bin\/false on port/);
  });
});
