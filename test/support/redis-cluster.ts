import { getFreePort } from './ports.js';
import {
  adminCall as call,
  adminCallBuffer as callBuffer,
  infoField,
  waitUntil,
} from './redis-admin.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';

/**
 * Throwaway Redis Cluster for tests: every node is a {@link startRedisServer}
 * process (free loopback port, no persistence, killed when the test process
 * dies), with its cluster bus on a second free port (`cluster-port`).
 *
 * The cluster is built by hand rather than with `redis-cli --cluster create`
 * (which sleeps a second per step): config epochs, `CLUSTER ADDSLOTSRANGE`,
 * a full mesh of `CLUSTER MEET`, `CLUSTER REPLICATE`, then waiting until every
 * node reports the same slot map, `cluster_state:ok` and synced replicas.
 * Slots are split like redis-cli does (3 masters: 0-5460, 5461-10922,
 * 10923-16383). Starting takes about 2 s, as a new master reports
 * `cluster_state:ok` only 2 s after it started (CLUSTER_WRITABLE_DELAY). A
 * short `cluster-node-timeout` and `cluster-replica-validity-factor 0` make a
 * failover take 2-3 s.
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

/** An inclusive range of hash slots. */
export type SlotRange = readonly [first: number, last: number];

/** One node of a {@link RedisCluster}. */
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

/** A slot migration begun by {@link RedisCluster.startSlotMigration}. */
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

const HOST = '127.0.0.1';
const SLOTS = 16_384;
const START_TIMEOUT_MS = 15_000;
const FAILOVER_TIMEOUT_MS = 20_000;
const MIGRATE_BATCH = 100;

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
    await cluster.form(masters);
    return cluster;
  } catch (error) {
    await Promise.all(servers.map(({ server }) => server.stop()));
    throw error;
  }
}

/**
 * The hash slot of a key as Redis Cluster computes it: CRC16 (XMODEM) of the
 * hash tag (the text between the first `{` and the next `}`, if not empty),
 * else of the whole key, modulo 16384.
 */
export function keySlot(key: string | Buffer): number {
  const bytes = typeof key === 'string' ? Buffer.from(key) : key;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % SLOTS;
  }
  return crc16(bytes) % SLOTS;
}

/**
 * A hash tag (without braces) whose keys land in `slot`: `lock:{${tag}}`
 * hashes to `slot`. The same slot always gives the same tag.
 */
export function hashTagForSlot(slot: number): string {
  checkSlot(slot);
  let tag = tagsBySlot.get(slot);
  for (let i = 0; tag === undefined; i++) {
    if (crc16(Buffer.from(`s${i}`)) % SLOTS === slot) tag = `s${i}`;
  }
  tagsBySlot.set(slot, tag);
  return tag;
}

const tagsBySlot = new Map<number, string>();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

function checkSlot(slot: number): void {
  if (!Number.isInteger(slot) || slot < 0 || slot >= SLOTS) {
    throw new RangeError(`slot must be an integer in 0-16383, got ${slot}`);
  }
}

/** Starts one cluster-enabled server, retrying when its bus port was taken. */
async function startNode(
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

class Node implements RedisClusterNode {
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

/** One node's `CLUSTER NODES` line. */
interface NodeView {
  id: string;
  flags: string[];
  masterId?: string;
  slots: SlotRange[];
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

  async form(masters: number): Promise<void> {
    const primaries = this.nodes.slice(0, masters);
    let first = 0;
    await Promise.all(
      primaries.map((node, i) => {
        const last =
          i === masters - 1
            ? SLOTS - 1
            : Math.max(first, Math.round(((i + 1) * SLOTS) / masters - 1));
        const range = [first, last] as const;
        first = last + 1;
        return (async () => {
          await call(node.port, 'CLUSTER', 'SET-CONFIG-EPOCH', i + 1);
          await call(node.port, 'CLUSTER', 'ADDSLOTSRANGE', ...range);
        })();
      }),
    );
    await Promise.all(
      this.nodes.flatMap((node, i) =>
        this.nodes
          .slice(i + 1)
          .map((other) =>
            call(node.port, 'CLUSTER', 'MEET', HOST, other.port, other.busPort),
          ),
      ),
    );
    await waitUntil('all nodes to meet', START_TIMEOUT_MS, async () => {
      const views = await Promise.all(this.nodes.map((n) => readView(n.port)));
      return views.every(
        (view) =>
          view.length === this.nodes.length &&
          view.every(({ flags }) => !flags.includes('handshake')),
      );
    });
    await Promise.all(
      this.nodes
        .filter((node) => node.role === 'replica')
        .map((node) =>
          call(node.port, 'CLUSTER', 'REPLICATE', primaries[node.shard].id),
        ),
    );
    await this.waitUntilConverged(START_TIMEOUT_MS);
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
    await this.waitUntilConverged(timeoutMs);
    this.killed.length = 0;
    return this.masters[last.shard];
  }

  async migrateSlot(slot: number, toMasterIndex: number): Promise<void> {
    const migration = await this.startSlotMigration(slot, toMasterIndex);
    await migration.finish();
  }

  async startSlotMigration(
    slot: number,
    toMasterIndex: number,
  ): Promise<SlotMigration> {
    checkSlot(slot);
    const target = this.masters[toMasterIndex];
    if (!target?.alive) {
      throw new Error(`No running master with index ${toMasterIndex}`);
    }
    const view = await readView(target.port);
    const ownerId = view.find(({ slots }) =>
      slots.some(([a, b]) => a <= slot && slot <= b),
    )?.id;
    const source = this.nodes.find((node) => node.id === ownerId);
    if (!source) throw new Error(`Nobody serves slot ${slot}`);
    if (source !== target) {
      await call(
        target.port,
        'CLUSTER',
        'SETSLOT',
        slot,
        'IMPORTING',
        source.id,
      );
      await call(
        source.port,
        'CLUSTER',
        'SETSLOT',
        slot,
        'MIGRATING',
        target.id,
      );
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
        this.masters
          .filter((node) => node.alive && node !== source && node !== target)
          .map((node) =>
            call(node.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', target.id),
          ),
      );
      await this.waitUntilConverged(START_TIMEOUT_MS);
    };
    return { slot, source, target, moveKeys, finish };
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.server.stop()));
  }

  /**
   * Waits until every live node has the same view of roles and slots, every
   * slot is served by a live master, live replicas are in sync and every live
   * node says `cluster_state:ok`; then adopts that view.
   */
  private async waitUntilConverged(timeoutMs: number): Promise<void> {
    let agreed: NodeView[] = [];
    await waitUntil('the cluster to converge', timeoutMs, async () => {
      const live = this.nodes.filter((node) => node.alive);
      const views = await Promise.all(live.map((node) => readView(node.port)));
      const signatures = new Set(views.map(signature));
      if (signatures.size !== 1) return false;
      const view = views[0];
      const liveIds = new Set(live.map((node) => node.id));
      let served = 0;
      for (const entry of view) {
        const isLive = liveIds.has(entry.id);
        if (isLive && entry.flags.some((f) => f === 'fail' || f === 'fail?')) {
          return false;
        }
        if (isLive && entry.flags.includes('master')) {
          for (const [a, b] of entry.slots) served += b - a + 1;
        } else if (entry.slots.length > 0) {
          return false;
        }
      }
      if (served !== SLOTS) return false;
      const infos = await Promise.all(
        live.map((node) => call(node.port, 'CLUSTER', 'INFO')),
      );
      if (
        !infos.every(
          (info) => infoField(String(info), 'cluster_state') === 'ok',
        )
      ) {
        return false;
      }
      const replicas = view.filter(
        (entry) => liveIds.has(entry.id) && entry.flags.includes('slave'),
      );
      for (const replica of replicas) {
        const port = this.nodes.find((node) => node.id === replica.id)!.port;
        const info = String(await call(port, 'INFO', 'replication'));
        if (infoField(info, 'master_link_status') !== 'up') return false;
      }
      agreed = view;
      return true;
    });
    for (const node of this.nodes) {
      const entry = agreed.find(({ id }) => id === node.id);
      if (!entry) continue;
      node.role = entry.flags.includes('slave') ? 'replica' : 'master';
      node.slots = entry.slots;
    }
  }
}

/** What must be the same in every node's view: roles, masters and slots. */
function signature(view: NodeView[]): string {
  return view
    .map(({ id, flags, masterId, slots }) => {
      const role = flags.includes('slave') ? 'replica' : 'master';
      return `${id} ${role} ${masterId ?? '-'} ${slots.join(',')}`;
    })
    .toSorted()
    .join('\n');
}

async function readView(port: number): Promise<NodeView[]> {
  const text = String(await call(port, 'CLUSTER', 'NODES'));
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, , flags, master, , , , , ...slotFields] = line.split(' ');
      return {
        id,
        flags: flags.split(','),
        masterId: master === '-' ? undefined : master,
        slots: slotFields
          .filter((field) => !field.startsWith('['))
          .map((field) => {
            const [a, b = a] = field.split('-').map(Number);
            return [a, b] as const;
          }),
      };
    });
}
