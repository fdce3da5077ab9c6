/*
 * What Redis 7.0.15 and ioredis 6.0.0 do in a cluster, found by the
 * experiments below ("scripts and sharded pub/sub", "fails over"), which fail
 * if that changes:
 *
 * a. A script (EVAL via Cluster#defineCommand) calling
 *    redis.call('spublish', channel, msg) works when the channel has the hash
 *    tag of KEYS[1] (KEYS[1] 'lock:{coupon:1}', channel 'lock:{coupon:1}:wake'):
 *    SPUBLISH returns the number of receivers and ssubscribers get the
 *    message, with or without a `#!lua` shebang. A channel in another slot:
 *    - served by another node: "ERR Script attempted to access a non local key
 *      in a cluster node";
 *    - served by the same node: works in a plain script (scripts without a
 *      shebang may cross slots, for compatibility), but a `#!lua` script gets
 *      "ERR Script attempted to access keys that do not hash to the same
 *      slot"; and either breaks once the slots are on different nodes.
 *    So: give the wake-up channel the hash tag of KEYS[1].
 * b. Cluster with `shardedSubscribers: true` delivers 'smessage' for channels
 *    in different slots (one subscriber connection per master; one
 *    ssubscribe() call per slot: several slots in one call reject with
 *    "Possible CROSSSLOT error"). After a master failover it resubscribes on
 *    the promoted replica by itself: messages published once
 *    waitForFailover() resolved arrive (within ~0.1 s here); messages
 *    published before it resubscribed are not delivered (pub/sub keeps
 *    none). Meanwhile the Cluster emits many 'error' events ("Connection is
 *    closed"): listen for them.
 * c. A script touching an undeclared key in the SAME slot as KEYS[1] works,
 *    with or without a `#!lua` shebang. (Other slots: as for SPUBLISH in a.)
 */
import net from 'node:net';

import { Cluster, Redis } from 'ioredis';

import { eventually } from './lock-fixtures.js';
import { isProcessGone } from './process-state.js';
import { runTs } from './processes.js';
import { startRedisCluster, type RedisCluster } from './redis-cluster.js';
import { hashTagForSlot, keySlot } from './redis-cluster-slots.js';

type ScriptedCluster = Cluster & {
  publishWake(key: string, channel: string, message: string): Promise<number>;
  publishWakeStrict(key: string, channel: string): Promise<number>;
  setBoth(key: string, other: string): Promise<string>;
  setBothStrict(key: string, other: string): Promise<string>;
};

const clients: (Cluster | Redis)[] = [];

function connect(cluster: RedisCluster, options = {}): Cluster {
  const client = new Cluster(cluster.startupNodes, options);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

function direct(port: number): Redis {
  const client = new Redis({ host: '127.0.0.1', port });
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** A key that lands in the first slot of master `index`, with a suffix. */
function keyOnMaster(
  cluster: RedisCluster,
  index: number,
  suffix = '',
): string {
  return `k:{${hashTagForSlot(cluster.masters[index].slots[0][0])}}${suffix}`;
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

describe('keySlot', () => {
  it('hashes like Redis Cluster (reference values from the cluster spec)', () => {
    expect(keySlot('123456789')).toBe(0x31c3 % 16_384);
    expect(keySlot('foo')).toBe(12_182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'));
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
    expect(keySlot(Buffer.from([0xff, 0x00, 0x7b]))).toBeLessThan(16_384);
  });

  it('finds a hash tag for any slot', () => {
    for (const slot of [0, 1, 5460, 5461, 16_383]) {
      expect(keySlot(`lock:{${hashTagForSlot(slot)}}`)).toBe(slot);
    }
    expect(() => hashTagForSlot(16_384)).toThrow(RangeError);
  });
});

describe('a cluster of 3 masters', () => {
  let cluster: RedisCluster;
  let startedInMs: number;

  beforeAll(async () => {
    const started = performance.now();
    cluster = await startRedisCluster({ masters: 3 });
    startedInMs = performance.now() - started;
  });

  afterAll(() => cluster?.stop());

  it('starts fast with even slot ranges on free loopback ports', async () => {
    expect(startedInMs).toBeLessThan(6_000);
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.masters).toEqual(cluster.nodes);
    expect(cluster.nodes.map((node) => node.slots)).toEqual([
      [[0, 5460]],
      [[5461, 10_922]],
      [[10_923, 16_383]],
    ]);
    for (const [i, node] of cluster.nodes.entries()) {
      expect(node).toMatchObject({
        host: '127.0.0.1',
        role: 'master',
        shard: i,
      });
      expect(node.port).not.toBe(6379);
      expect(node.id).toMatch(/^[0-9a-f]{40}$/);
      expect(node.alive).toBe(true);
      expect(node.pid).toBe(node.server.pid());
    }
    expect(cluster.startupNodes).toEqual(
      cluster.nodes.map(({ port }) => ({ host: '127.0.0.1', port })),
    );

    const client = connect(cluster);
    for (const i of [0, 1, 2]) {
      await client.set(keyOnMaster(cluster, i), `on ${i}`);
      expect(await direct(cluster.nodes[i].port).dbsize()).toBe(1);
    }
    expect(await client.get(keyOnMaster(cluster, 2))).toBe('on 2');
  });

  it('computes slots as CLUSTER KEYSLOT does', async () => {
    const redis = direct(cluster.nodes[0].port);
    const keys = [
      'lock:{coupon:1}',
      'lock:{coupon:1}:wake',
      'plain',
      '{}x',
      'a{b',
      'foo{}{bar}',
      'foo{{bar}}zap',
      'ü{ß}',
    ];
    for (const key of keys) {
      expect(cluster.slotOf(key)).toBe(await redis.cluster('KEYSLOT', key));
    }
  });

  it('migrates a slot with its keys, and clients follow', async () => {
    const client = connect(cluster);
    const slot = 100;
    const tag = hashTagForSlot(slot);
    const keys = Array.from({ length: 150 }, (_, i) => `m:{${tag}}:${i}`);
    for (const key of keys) await client.set(key, key);

    const started = performance.now();
    await cluster.migrateSlot(slot, 2);
    expect(performance.now() - started).toBeLessThan(3_000);

    expect(cluster.masters[0].slots).toEqual([
      [0, 99],
      [101, 5460],
    ]);
    expect(cluster.masters[2].slots).toEqual([
      [100, 100],
      [10_923, 16_383],
    ]);
    const countOn = (i: number) =>
      direct(cluster.nodes[i].port).cluster('COUNTKEYSINSLOT', slot);
    expect(await countOn(0)).toBe(0);
    expect(await countOn(2)).toBe(150);
    expect(await client.get(keys[149])).toBe(keys[149]);
    await cluster.migrateSlot(slot, 2); // already there

    const migration = await cluster.startSlotMigration(slot, 1);
    expect(migration.source).toBe(cluster.nodes[2]);
    expect(migration.target).toBe(cluster.nodes[1]);
    expect(await migration.moveKeys()).toBe(150);
    await expect(direct(cluster.nodes[2].port).get(keys[0])).rejects.toThrow(
      /^ASK /,
    );
    expect(await client.get(keys[0])).toBe(keys[0]);
    await client.set(keys[0], 'written during the migration');
    await migration.finish();
    expect(cluster.masters[1].slots).toEqual([
      [100, 100],
      [5461, 10_922],
    ]);
    expect(await countOn(1)).toBe(150);
    expect(await client.get(keys[0])).toBe('written during the migration');
  });

  it('refuses to wait for a failover nobody can do', async () => {
    await expect(cluster.waitForFailover()).rejects.toThrow(
      /No master was killed/,
    );
    const killed = await cluster.killMaster(1);
    expect(killed.alive).toBe(false);
    expect(isProcessGone(killed.pid)).toBe(true);
    await expect(cluster.killMaster(1)).rejects.toThrow(/not running/);
    await expect(cluster.waitForFailover()).rejects.toThrow(/no live replica/);
  });

  it('stops every node', async () => {
    await cluster.stop();
    for (const node of cluster.nodes) {
      expect(node.alive).toBe(false);
      expect(isProcessGone(node.pid)).toBe(true);
      expect(await canBind(node.port)).toBe(true);
      expect(await canBind(node.busPort)).toBe(true);
    }
    await cluster.stop();
  });
});

describe('a cluster of 3 masters with a replica each', () => {
  let cluster: RedisCluster;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  });

  afterAll(() => cluster?.stop());

  it('starts with a synced replica per master', async () => {
    expect(cluster.nodes.map((node) => [node.role, node.shard])).toEqual([
      ['master', 0],
      ['master', 1],
      ['master', 2],
      ['replica', 0],
      ['replica', 1],
      ['replica', 2],
    ]);
    for (const replica of cluster.nodes.slice(3)) {
      expect(replica.slots).toEqual([]);
      const info = await direct(replica.port).info('replication');
      expect(info).toContain(
        `master_port:${cluster.masters[replica.shard].port}`,
      );
      expect(info).toContain('master_link_status:up');
    }
  });

  describe('scripts and sharded pub/sub (experiments a and c)', () => {
    const key = 'lock:{coupon:1}';
    let client: ScriptedCluster;
    let owner: number;
    let sameNodeOtherSlot: string;
    let otherNode: string;

    beforeAll(() => {
      client = new Cluster(cluster.startupNodes) as ScriptedCluster;
      client.defineCommand('publishWake', {
        numberOfKeys: 1,
        lua: "redis.call('set', KEYS[1], 'held'); return redis.call('spublish', ARGV[1], ARGV[2])",
      });
      client.defineCommand('publishWakeStrict', {
        numberOfKeys: 1,
        lua: "#!lua\nreturn redis.call('spublish', ARGV[1], 'x')",
      });
      client.defineCommand('setBoth', {
        numberOfKeys: 1,
        lua: "redis.call('set', KEYS[1], 'a'); return redis.call('set', ARGV[1], 'b')",
      });
      client.defineCommand('setBothStrict', {
        numberOfKeys: 1,
        lua: "#!lua\nredis.call('set', KEYS[1], 'a'); return redis.call('set', ARGV[1], 'b')",
      });
      const slot = cluster.slotOf(key);
      owner = cluster.masters.findIndex(({ slots }) =>
        slots.some(([a, b]) => a <= slot && slot <= b),
      );
      const [[first]] = cluster.masters[owner].slots;
      sameNodeOtherSlot = `x:{${hashTagForSlot(first === slot ? first + 1 : first)}}`;
      otherNode = keyOnMaster(cluster, (owner + 1) % 3);
    });

    afterAll(() => client.disconnect());

    it('a. SPUBLISH from a script to a channel in the slot of KEYS[1] works', async () => {
      const channel = 'lock:{coupon:1}:wake';
      const subscriber = connect(cluster, { shardedSubscribers: true });
      const received: string[] = [];
      subscriber.on('smessage', (ch: string, message: string) =>
        received.push(`${ch} ${message}`),
      );
      await subscriber.ssubscribe(channel);

      expect(await client.publishWake(key, channel, 'go')).toBe(1);
      expect(await client.publishWakeStrict(key, channel)).toBe(1);
      await eventually(() => received.length === 2);
      expect(received).toEqual([`${channel} go`, `${channel} x`]);
      expect(await client.get(key)).toBe('held');
    });

    it('a. ... and a channel in another slot only on the same node, without a shebang', async () => {
      await expect(client.publishWake(key, otherNode, 'go')).rejects.toThrow(
        /Script attempted to access a non local key in a cluster node/,
      );
      expect(await client.publishWake(key, sameNodeOtherSlot, 'go')).toBe(0);
      await expect(
        client.publishWakeStrict(key, sameNodeOtherSlot),
      ).rejects.toThrow(
        /Script attempted to access keys that do not hash to the same slot/,
      );
    });

    it('c. a script may touch an undeclared key in the slot of KEYS[1]', async () => {
      expect(await client.setBoth(key, 'lock:{coupon:1}:other')).toBe('OK');
      expect(await client.setBothStrict(key, 'lock:{coupon:1}:other')).toBe(
        'OK',
      );
      expect(await client.get('lock:{coupon:1}:other')).toBe('b');
      // Other slots: as for SPUBLISH.
      await expect(client.setBoth(key, otherNode)).rejects.toThrow(
        /non local key/,
      );
      expect(await client.setBoth(key, sameNodeOtherSlot)).toBe('OK');
      await expect(
        client.setBothStrict(key, sameNodeOtherSlot),
      ).rejects.toThrow(/do not hash to the same slot/);
    });
  });

  it('fails over to the replica, and sharded subscribers follow (experiment b)', async () => {
    const client = connect(cluster);
    const subscriber = connect(cluster, { shardedSubscribers: true });
    const channels = [0, 1, 2].map((i) => keyOnMaster(cluster, i, ':wake'));
    const received = new Set<string>();
    subscriber.on('smessage', (channel: string, message: string) =>
      received.add(`${channel} ${message}`),
    );
    await expect(subscriber.ssubscribe(...channels)).rejects.toThrow(
      /All channels must hash to the same slot/,
    );
    for (const channel of channels) await subscriber.ssubscribe(channel);
    for (const channel of channels) await client.spublish(channel, 'before');
    await eventually(() => received.size === 3);

    const oldMaster = cluster.masters[0];
    const replica = cluster.nodes[3];
    const started = performance.now();
    expect(await cluster.killMaster(0)).toBe(oldMaster);
    expect(oldMaster.alive).toBe(false);
    const promoted = await cluster.waitForFailover();
    const failoverMs = performance.now() - started;
    expect(failoverMs).toBeLessThan(10_000);

    expect(promoted).toBe(replica);
    expect(promoted.role).toBe('master');
    expect(promoted.slots).toEqual([[0, 5460]]);
    expect(cluster.masters[0]).toBe(promoted);
    expect(await direct(promoted.port).call('ROLE')).toContain('master');
    await client.set(keyOnMaster(cluster, 0), 'after the failover');
    expect(await direct(promoted.port).get(keyOnMaster(cluster, 0))).toBe(
      'after the failover',
    );

    const published = performance.now();
    await eventually(async () => {
      for (const channel of channels) await client.spublish(channel, 'after');
      return channels.every((channel) => received.has(`${channel} after`));
    }, 5_000);
    expect(performance.now() - published).toBeLessThan(3_000);
    await expect(cluster.waitForFailover()).rejects.toThrow(
      /No master was killed/,
    );
  });
});

it('kills the nodes of a cluster left running when the process exits', async () => {
  const stdout = await runTs('test/support/workers/forgotten-ha.ts', [
    'cluster',
  ]);
  const { pids } = JSON.parse(stdout) as { pids: number[] };
  expect(pids).toHaveLength(2);
  for (const pid of pids) await eventually(() => isProcessGone(pid), 2_000);
});
