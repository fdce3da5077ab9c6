import type { Cluster, Redis } from 'ioredis';
import {
  allScriptsLoaded,
  type LockBackendHealth,
  type LockNodeHealth,
} from '../backend-health.js';
import type { LockContext } from './lock-context.js';
import { lockScriptSources } from './lock-scripts.js';
import { ProbedScripts, probeRedisNode } from './node-probe.js';

const lockScripts = new ProbedScripts(lockScriptSources);

/** Hash slots of a Redis Cluster. */
const slotCount = 16384;

/**
 * The probe of `RedisLockBackend`: its server, or on a Cluster every master
 * that serves a slot, each bounded by `timeoutMs` (default: the backend's
 * command timeout). Never rejects.
 */
export async function probeRedisBackend(
  context: LockContext,
  timeoutMs = context.settings.commandTimeoutMs,
): Promise<LockBackendHealth> {
  const { client } = context;
  const store = client.isCluster ? 'redis-cluster' : 'redis';
  if (context.closed)
    return { up: false, store, nodes: [], message: 'the backend is closed' };
  if (client.isCluster) return probeCluster(client as Cluster, timeoutMs);
  const node = await probeRedisNode(client as Redis, lockScripts, timeoutMs);
  return {
    up: node.up,
    store,
    latencyMs: node.latencyMs,
    scriptsLoaded: allScriptsLoaded([node]),
    nodes: [node],
    ...(node.up ? {} : { message: node.message }),
  };
}

/**
 * Probes the masters of the client's slot map rather than its connection
 * pool: ioredis drops a master's connection for good when it closes, so a
 * master that died without a replica to take over is missing from the pool,
 * yet still owns its slots, which no lock on them can be taken on.
 */
async function probeCluster(
  cluster: Cluster,
  timeoutMs: number,
): Promise<LockBackendHealth> {
  const store = 'redis-cluster';
  const { masters, uncovered } = slotMasters(cluster);
  if (masters.length === 0)
    return {
      up: false,
      store,
      nodes: [],
      message: `no slot map yet (the Cluster connection is ${cluster.status})`,
    };
  const pool = new Map(
    cluster.nodes().map((node) => [nodeKey(node), node] as const),
  );
  const nodes = await Promise.all(
    masters.map((address): Promise<LockNodeHealth> | LockNodeHealth => {
      const node = pool.get(address);
      return node
        ? probeRedisNode(node, lockScripts, timeoutMs)
        : { address, up: false, message: 'no connection to this master' };
    }),
  );
  const down = nodes.filter((node) => !node.up);
  const up = down.length === 0 && uncovered === 0;
  let message: string | undefined;
  if (uncovered > 0) message = `${uncovered} slots have no master`;
  else if (down.length > 0)
    message = `master ${down.map((node) => node.address).join(', ')} down`;
  return {
    up,
    store,
    latencyMs: up
      ? Math.max(...nodes.map((node) => node.latencyMs ?? 0))
      : undefined,
    scriptsLoaded: allScriptsLoaded(nodes),
    nodes,
    ...(message === undefined ? {} : { message }),
  };
}

/** The distinct masters of the slot map (`host:port`), and how many slots have none. */
function slotMasters(cluster: Cluster): {
  masters: string[];
  uncovered: number;
} {
  const masters = new Set<string>();
  let uncovered = 0;
  for (let slot = 0; slot < slotCount; slot++) {
    const master = cluster.slots[slot]?.[0];
    if (master) masters.add(master);
    else uncovered += 1;
  }
  return { masters: [...masters].toSorted(), uncovered };
}

/** The key ioredis gives a node in its slot map. */
function nodeKey(node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}
