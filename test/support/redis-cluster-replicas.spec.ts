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
import { Cluster } from 'ioredis';

import { eventually } from './lock-fixtures.js';
import { startRedisCluster, type RedisCluster } from './redis-cluster.js';
import {
  connect,
  direct,
  disconnectClients,
  keyOnMaster,
} from './redis-cluster-fixtures.js';
import { hashTagForSlot } from './redis-cluster-slots.js';

type ScriptedCluster = Cluster & {
  publishWake(key: string, channel: string, message: string): Promise<number>;
  publishWakeStrict(key: string, channel: string): Promise<number>;
  setBoth(key: string, other: string): Promise<string>;
  setBothStrict(key: string, other: string): Promise<string>;
};

afterEach(disconnectClients);

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
