import {
  adminCall as call,
  adminCallBuffer as callBuffer,
} from './redis-admin.js';
import { readView, waitUntilConverged } from './redis-cluster-convergence.js';
import { START_TIMEOUT_MS } from './redis-cluster-formation.js';
import {
  HOST,
  type Node,
  type RedisClusterNode,
} from './redis-cluster-node.js';
import { checkSlot } from './redis-cluster-slots.js';

/**
 * Moving a hash slot, with its keys, from one master of a test cluster to
 * another: SETSLOT IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE.
 */

/** A slot migration begun by `RedisCluster.startSlotMigration`. */
export interface SlotMigration {
  readonly slot: number;
  readonly source: RedisClusterNode;
  readonly target: RedisClusterNode;
  /**
   * MIGRATEs the keys of the slot still on the source to the target; resolves
   * with how many. Meanwhile clients get ASK redirections for moved keys.
   */
  moveKeys(): Promise<number>;
  /**
   * Moves the remaining keys, assigns the slot to the target on every master
   * (`CLUSTER SETSLOT <slot> NODE`) and waits until all nodes agree.
   */
  finish(): Promise<void>;
}

/** The nodes of a cluster; `masters` is read anew on each use. */
export interface ClusterNodes {
  readonly nodes: readonly Node[];
  readonly masters: readonly Node[];
}

const MIGRATE_BATCH = 100;

/**
 * Marks `slot` IMPORTING on the master of shard `toMasterIndex` and MIGRATING
 * on its current owner, and stops there; nothing to do if the target serves
 * the slot already.
 */
export async function startSlotMigration(
  cluster: ClusterNodes,
  slot: number,
  toMasterIndex: number,
): Promise<SlotMigration> {
  checkSlot(slot);
  const target = cluster.masters[toMasterIndex];
  if (!target?.alive) {
    throw new Error(`No running master with index ${toMasterIndex}`);
  }
  const view = await readView(target.port);
  const ownerId = view.find(({ slots }) =>
    slots.some(([a, b]) => a <= slot && slot <= b),
  )?.id;
  const source = cluster.nodes.find((node) => node.id === ownerId);
  if (!source) throw new Error(`Nobody serves slot ${slot}`);
  if (source !== target) {
    await call(target.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
    await call(source.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
  }
  const moveKeys = async () => {
    if (source === target) return 0;
    let moved = 0;
    for (;;) {
      const keys = (await callBuffer(
        source.port,
        'CLUSTER',
        'GETKEYSINSLOT',
        slot,
        MIGRATE_BATCH,
      )) as Buffer[];
      if (keys.length === 0) return moved;
      await call(
        source.port,
        'MIGRATE',
        HOST,
        target.port,
        '',
        0,
        5_000,
        'REPLACE',
        'KEYS',
        ...keys,
      );
      moved += keys.length;
    }
  };
  const finish = async () => {
    if (source === target) return;
    await moveKeys();
    await call(target.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    await call(source.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    await Promise.all(
      cluster.masters
        .filter((node) => node.alive && node !== source && node !== target)
        .map((node) =>
          call(node.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', target.id),
        ),
    );
    await waitUntilConverged(cluster.nodes, START_TIMEOUT_MS);
  };
  return { slot, source, target, moveKeys, finish };
}
