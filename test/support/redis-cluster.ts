import { adminCall as call } from './redis-admin.js';
import { waitUntilConverged } from './redis-cluster-convergence.js';
import { formCluster } from './redis-cluster-formation.js';
import {
  startSlotMigration,
  type SlotMigration,
} from './redis-cluster-migration.js';
import {
  Node,
  startNode,
  type RedisClusterNode,
} from './redis-cluster-node.js';
import { keySlot } from './redis-cluster-slots.js';

/**
 * Throwaway Redis Cluster for tests: every node is a `startRedisServer`
 * process (free loopback port, no persistence, killed when the test process
 * dies), with its cluster bus on a second free port (`cluster-port`); see
 * `redis-cluster-node.ts`.
 *
 * The cluster is built by hand (`redis-cluster-formation.ts`), slots split
 * like redis-cli does. Starting takes about 2 s, as a new master reports
 * `cluster_state:ok` only 2 s after it started (CLUSTER_WRITABLE_DELAY). A
 * short `cluster-node-timeout` and `cluster-replica-validity-factor 0` make a
 * failover take 2-3 s. Hash slots of keys: `redis-cluster-slots.ts`.
 */

/** How {@link startRedisCluster} builds the cluster. */
export interface RedisClusterOptions {
  /**
   * Number of masters, each serving one even range of slots, in order. A
   * failover needs the votes of a majority of masters, so at least 3 for
   * {@link RedisCluster.killMaster}.
   */
  masters: number;
  /** Replicas of each master. Default 0. */
  replicasPerMaster?: 0 | 1;
  /** `cluster-node-timeout` in ms. Default 1000. */
  nodeTimeoutMs?: number;
}

/** A running cluster started by {@link startRedisCluster}. */
export interface RedisCluster {
  /** Every node: the masters first, in order, then the replicas. */
  readonly nodes: readonly RedisClusterNode[];
  /**
   * The master of each shard, by index: the promoted replica after a failover,
   * the killed master until then.
   */
  readonly masters: readonly RedisClusterNode[];
  /** Addresses of all nodes, for `new Cluster(startupNodes)`. */
  readonly startupNodes: { host: string; port: number }[];
  /** The hash slot of a key: CRC16 of its hash tag, as {@link keySlot}. */
  slotOf(key: string | Buffer): number;
  /**
   * SIGKILLs the master of shard `index` and resolves with it once its process
   * has exited. Its replica takes over on {@link waitForFailover}.
   */
  killMaster(index: number): Promise<RedisClusterNode>;
  /**
   * Waits until every shard whose master was killed has a promoted replica,
   * all live nodes agree on the slot map and report `cluster_state:ok`.
   * Resolves with the replica promoted for the last killed master.
   *
   * @throws Error right away if a killed master had no live replica, or when
   *   the cluster did not recover within `timeoutMs` (default 20 s).
   */
  waitForFailover(timeoutMs?: number): Promise<RedisClusterNode>;
  /**
   * Moves `slot` with its keys to the master of shard `toMasterIndex` (SETSLOT
   * IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) and waits until all nodes
   * agree. Nothing to do if it serves the slot already.
   */
  migrateSlot(slot: number, toMasterIndex: number): Promise<void>;
  /**
   * Marks `slot` IMPORTING on the master of shard `toMasterIndex` and
   * MIGRATING on its current owner, and stops there: for tests of clients
   * during a migration (ASK redirections). Finish it with
   * {@link SlotMigration.finish}.
   */
  startSlotMigration(
    slot: number,
    toMasterIndex: number,
  ): Promise<SlotMigration>;
  /** Stops every node and waits until the processes have exited. Idempotent. */
  stop(): Promise<void>;
}

const FAILOVER_TIMEOUT_MS = 20_000;

/**
 * Starts a cluster of `masters` masters (and `replicasPerMaster` replicas
 * each) and resolves once it is fully formed: every slot served, replicas in
 * sync, all nodes agreeing. Stop it with {@link RedisCluster.stop}; nodes still
 * running when the process exits are killed.
 */
export async function startRedisCluster(
  options: RedisClusterOptions,
): Promise<RedisCluster> {
  const { masters, replicasPerMaster = 0, nodeTimeoutMs = 1_000 } = options;
  if (!Number.isInteger(masters) || masters < 1) {
    throw new RangeError(`masters must be a positive integer, got ${masters}`);
  }
  const shards = Array.from(
    { length: masters * (1 + replicasPerMaster) },
    (_, i) => i % masters,
  );
  const started = await Promise.allSettled(
    shards.map(() => startNode(nodeTimeoutMs)),
  );
  const servers = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const cluster = new ManagedCluster();
  try {
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    const ids = await Promise.all(
      servers.map(({ server }) => call(server.port, 'CLUSTER', 'MYID')),
    );
    servers.forEach(({ server, busPort }, i) =>
      cluster.nodes.push(
        new Node(server, busPort, String(ids[i]), shards[i], i < masters),
      ),
    );
    await formCluster(cluster.nodes, masters);
    return cluster;
  } catch (error) {
    await Promise.all(servers.map(({ server }) => server.stop()));
    throw error;
  }
}

class ManagedCluster implements RedisCluster {
  readonly nodes: Node[] = [];
  /** Masters killed since the last successful failover wait. */
  private readonly killed: Node[] = [];

  get masters(): Node[] {
    const byShard: Node[] = [];
    for (const node of this.nodes) {
      const current = byShard[node.shard];
      if (
        node.role === 'master' &&
        (!current || (!current.alive && node.alive))
      ) {
        byShard[node.shard] = node;
      }
    }
    return byShard;
  }

  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map(({ host, port }) => ({ host, port }));
  }

  slotOf(key: string | Buffer): number {
    return keySlot(key);
  }

  async killMaster(index: number): Promise<Node> {
    const node = this.masters[index];
    if (!node) throw new RangeError(`No master with index ${index}`);
    if (!node.alive) throw new Error(`Master ${index} is not running`);
    await node.server.kill();
    this.killed.push(node);
    return node;
  }

  async waitForFailover(timeoutMs = FAILOVER_TIMEOUT_MS): Promise<Node> {
    const last = this.killed.at(-1);
    if (!last) throw new Error('No master was killed: nothing to fail over');
    for (const dead of this.killed) {
      const heir = this.nodes.find(
        (node) => node.shard === dead.shard && node !== dead && node.alive,
      );
      if (!heir) {
        throw new Error(
          `Master ${dead.shard} (port ${dead.port}) has no live replica to promote`,
        );
      }
    }
    await waitUntilConverged(this.nodes, timeoutMs);
    this.killed.length = 0;
    return this.masters[last.shard];
  }

  async migrateSlot(slot: number, toMasterIndex: number): Promise<void> {
    const migration = await this.startSlotMigration(slot, toMasterIndex);
    await migration.finish();
  }

  startSlotMigration(
    slot: number,
    toMasterIndex: number,
  ): Promise<SlotMigration> {
    return startSlotMigration(this, slot, toMasterIndex);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.server.stop()));
  }
}
