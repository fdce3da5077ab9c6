import { Logger } from '@nestjs/common';
import { getFreePort } from '../../../test/support/ports.js';
import { keySlot } from '../../../test/support/redis-cluster-slots.js';
import {
  ConfigError,
  loadConfig,
  mergeConfig,
} from '../src/config/app-config.js';
import { buyersKey, stockKey } from '../src/coupon/stock-cache.js';
import { openRedis } from '../src/redis/resolve-redis.js';

// The clients' own connection warnings, too.
Logger.overrideLogger(false);
const quiet = new Logger('test');

describe('Redis Cluster and Sentinel configuration', () => {
  it('reads REDIS_CLUSTER_NODES as host:port addresses', () => {
    const config = loadConfig({
      REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, redis-b.internal:7001,[::1]:7002 ',
    });
    expect(config.redisCluster).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b.internal', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(config.redisSentinel).toBeUndefined();
  });

  it('reads REDIS_SENTINELS with REDIS_SENTINEL_NAME, mymaster by default', () => {
    expect(
      loadConfig({ REDIS_SENTINELS: 's1:26379,s2:26380' }).redisSentinel,
    ).toEqual({
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      name: 'mymaster',
    });
    expect(
      loadConfig({ REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'shop' })
        .redisSentinel?.name,
    ).toBe('shop');
  });

  it('leaves both unset by default and when blank', () => {
    for (const env of [
      {},
      { REDIS_CLUSTER_NODES: '  ', REDIS_SENTINELS: '' },
    ]) {
      const config = loadConfig(env);
      expect(config.redisCluster).toBeUndefined();
      expect(config.redisSentinel).toBeUndefined();
    }
  });

  it('refuses REDIS_CLUSTER_NODES together with REDIS_SENTINELS', () => {
    const env = { REDIS_CLUSTER_NODES: 'a:7000', REDIS_SENTINELS: 'b:26379' };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(
      /REDIS_CLUSTER_NODES.*REDIS_SENTINELS.*not both/,
    );
  });

  it('refuses REDIS_SENTINEL_NAME without REDIS_SENTINELS', () => {
    expect(() => loadConfig({ REDIS_SENTINEL_NAME: 'shop' })).toThrow(
      /REDIS_SENTINEL_NAME is set but REDIS_SENTINELS is not/,
    );
  });

  it('refuses malformed addresses, quoting the bad entry', () => {
    for (const bad of [
      'localhost',
      'host:',
      ':7000',
      'host:0',
      'host:65536',
      'host:7000x',
      'a:7000,,b:7001',
      'a b:7000',
      '::1:7000',
      'redis://a:7000',
      'a:7000;b:7001',
    ]) {
      for (const name of ['REDIS_CLUSTER_NODES', 'REDIS_SENTINELS']) {
        const load = () => loadConfig({ [name]: bad });
        expect(load, `${name}=${bad}`).toThrow(ConfigError);
        expect(load, `${name}=${bad}`).toThrow(
          new RegExp(`^${name} must be a comma-separated list of host:port`),
        );
      }
    }
    expect(() => loadConfig({ REDIS_SENTINELS: 'a:1,b' })).toThrow(
      /got "b" in "a:1,b"/,
    );
  });
});

/** An address nothing listens on. */
const deadAddress = async () => `127.0.0.1:${await getFreePort()}`;

describe('connecting to the configured deployment', () => {
  it('fails fast, naming REDIS_CLUSTER_NODES, when the cluster does not answer (REDIS_URL ignored)', async () => {
    const config = loadConfig({
      REDIS_CLUSTER_NODES: await deadAddress(),
      REDIS_URL: 'redis://127.0.0.1:6379',
      LOCAL_REDIS: '1',
    });
    const startedAt = Date.now();

    await expect(openRedis(config, quiet)).rejects.toThrow(
      /^The Redis Cluster at 127\.0\.0\.1:\d+ \(REDIS_CLUSTER_NODES\) does not answer: /,
    );
    expect(Date.now() - startedAt).toBeLessThan(6_000);
  });

  it('fails fast, naming REDIS_SENTINELS, when no Sentinel answers', async () => {
    const config = loadConfig({
      REDIS_SENTINELS: `${await deadAddress()},${await deadAddress()}`,
      REDIS_SENTINEL_NAME: 'shop',
    });

    await expect(openRedis(config, quiet)).rejects.toThrow(
      /^The Redis master "shop" of the Sentinels at 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+ \(REDIS_SENTINELS\) does not answer: /,
    );
  });

  it('refuses a cluster and Sentinels set together by overrides', async () => {
    const config = mergeConfig(loadConfig({}), {
      redisCluster: [{ host: '127.0.0.1', port: 7000 }],
      redisSentinel: {
        sentinels: [{ host: '127.0.0.1', port: 26379 }],
        name: 'mymaster',
      },
    });
    await expect(openRedis(config, quiet)).rejects.toThrow(ConfigError);
  });
});

describe('Redis keys', () => {
  it('puts the keys of one coupon in one cluster slot', () => {
    for (const id of [1, 2, 7, 12_345, 2_147_483_647]) {
      expect(stockKey(id)).toBe(`seckill:{coupon:${id}}:stock`);
      expect(buyersKey(id)).toBe(`seckill:{coupon:${id}}:buyers`);
      const slot = keySlot(stockKey(id));
      expect(keySlot(buyersKey(id))).toBe(slot);
      // The rebuild's temporary set, renamed onto buyersKey in one MULTI.
      expect(keySlot(`${buyersKey(id)}:rebuild:0123456789ab`)).toBe(slot);
    }
    expect(keySlot(stockKey(1))).not.toBe(keySlot(stockKey(2)));
  });
});
