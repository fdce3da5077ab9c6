/**
 * A cluster of masters only: start-up, slots, slot migration, killing a
 * master with no replica to take over, and stopping; and a cluster left
 * running when its process exits.
 */
import net from 'node:net';

import { eventually } from './lock-fixtures.js';
import { isProcessGone } from './process-state.js';
import { runTs } from './processes.js';
import { startRedisCluster, type RedisCluster } from './redis-cluster.js';
import {
  connect,
  direct,
  disconnectClients,
  keyOnMaster,
} from './redis-cluster-fixtures.js';
import { hashTagForSlot } from './redis-cluster-slots.js';

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      server.close(() => resolve(true));
    });
  });
}

afterEach(disconnectClients);

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

it('kills the nodes of a cluster left running when the process exits', async () => {
  const stdout = await runTs('test/support/workers/forgotten-ha.ts', [
    'cluster',
  ]);
  const { pids } = JSON.parse(stdout) as { pids: number[] };
  expect(pids).toHaveLength(2);
  for (const pid of pids) await eventually(() => isProcessGone(pid), 2_000);
});
