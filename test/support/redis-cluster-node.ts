import { getFreePort } from './ports.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';

/**
 * One node of a test Redis Cluster: a {@link startRedisServer} process with
 * cluster mode on and its cluster bus on a second free port (`cluster-port`).
 */

/** The address every node listens on. */
export const HOST = '127.0.0.1';

/** An inclusive range of hash slots. */
export type SlotRange = readonly [first: number, last: number];

/** One node of a cluster started by `startRedisCluster`. */
export interface RedisClusterNode {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** The cluster bus port (`cluster-port`). */
  readonly busPort: number;
  /** The cluster node id (`CLUSTER MYID`). */
  readonly id: string;
  /** The process id it was started with (nodes are never restarted). */
  readonly pid: number;
  /** Whether the process is still running (false once killed or stopped). */
  readonly alive: boolean;
  /**
   * Index of the master it was started as or for: masters and their replicas
   * share it, and a replica promoted by a failover takes its master's place.
   */
  readonly shard: number;
  /** Its role as last read from the cluster (at start, failover, migration). */
  readonly role: 'master' | 'replica';
  /** The slots it serves as master, as last read; empty for replicas. */
  readonly slots: readonly SlotRange[];
  /** The server process, e.g. to freeze it. */
  readonly server: RedisServerHandle;
}

/**
 * Starts one cluster-enabled server, retrying when its bus port was taken.
 * A short `cluster-node-timeout` and `cluster-replica-validity-factor 0` make a
 * failover take 2-3 s.
 */
export async function startNode(
  nodeTimeoutMs: number,
): Promise<{ server: RedisServerHandle; busPort: number }> {
  for (let attempt = 1; ; attempt++) {
    const busPort = await getFreePort();
    try {
      const config = {
        'cluster-enabled': 'yes',
        'cluster-config-file': 'nodes.conf',
        'cluster-port': busPort,
        'cluster-node-timeout': nodeTimeoutMs,
        'cluster-replica-validity-factor': 0,
        'cluster-allow-replica-migration': 'no',
        'repl-diskless-sync-delay': 0,
      };
      const server = await startRedisServer({
        extraArgs: Object.entries(config).flatMap(([name, value]) => [
          `--${name}`,
          String(value),
        ]),
      });
      return { server, busPort };
    } catch (error) {
      if (attempt >= 5 || !/already in use/i.test(String(error))) throw error;
    }
  }
}

/**
 * A started node; its role and slots are updated whenever the cluster is read
 * (see `waitUntilConverged`).
 */
export class Node implements RedisClusterNode {
  readonly host = HOST;
  readonly port: number;
  readonly pid: number;
  role: 'master' | 'replica';
  slots: SlotRange[] = [];

  constructor(
    readonly server: RedisServerHandle,
    readonly busPort: number,
    readonly id: string,
    readonly shard: number,
    master: boolean,
  ) {
    this.port = server.port;
    this.pid = server.pid()!;
    this.role = master ? 'master' : 'replica';
  }

  get alive(): boolean {
    return this.server.pid() !== undefined;
  }
}
