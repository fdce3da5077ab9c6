import { adminCall as call, infoField, waitUntil } from './redis-admin.js';
import { startRedisServer, type RedisServerHandle } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * A throwaway Sentinel setup for tests: one master, one replica and a group of
 * Sentinels, each a {@link startRedisServer} process (free loopback port, no
 * persistence, killed when the test process dies); each Sentinel rewrites its
 * own config file in its private temporary directory.
 *
 * Timings are short so a failover takes a few seconds: `down-after-milliseconds`
 * 1000, `failover-timeout` 5000, and Sentinels say hello to each other every
 * 200 ms (`SENTINEL DEBUG publish-period`) so the group forms at once. A
 * failover after a split vote would be retried after 2 x `failover-timeout`.
 */

/** How {@link startSentinelGroup} sets up the group. */
export interface SentinelGroupOptions {
  /** Number of Sentinels. Default 3. */
  sentinels?: number;
  /** Sentinels needed to agree the master is down. Default: a majority. */
  quorum?: number;
  /** The master's name. Default `mymaster`. */
  name?: string;
  /** `down-after-milliseconds`. Default 1000. */
  downAfterMs?: number;
}

/** An address for ioredis's `sentinels` option. */
export interface SentinelAddress {
  host: string;
  port: number;
}

/** A running group started by {@link startSentinelGroup}. */
export interface SentinelGroup {
  /** The master's name: `new Redis({ sentinels, name })`. */
  readonly name: string;
  /** The Sentinels' addresses: `new Redis({ sentinels, name })`. */
  readonly sentinels: SentinelAddress[];
  /**
   * The Sentinel processes. One restarted starts from its first config again:
   * it monitors the first master, whatever happened since.
   */
  readonly sentinelServers: readonly RedisServerHandle[];
  /**
   * The server that is master: the first one until {@link waitForFailover}
   * saw the Sentinels promote the other one.
   */
  readonly master: RedisServerHandle;
  /** The other server: after a failover, the old (killed) master. */
  readonly replica: RedisServerHandle;
  /**
   * Leaves the replica behind the master from now on, so that writes acked by
   * the master are lost when {@link killMaster} is followed by a failover.
   *
   * The replica is switched (partial resync, nothing lost so far) to replicate
   * through a TCP proxy, which then holds every byte between them: both ends
   * keep an open, healthy-looking link, the replica answers the Sentinels and
   * is promoted normally, but never gets the writes made meanwhile;
   * {@link killMaster} drops the held bytes with the proxy. (SIGSTOP of the
   * replica does not lose them: the kernel buffers them and the replica
   * applies them once continued. Nor can a stopped replica be promoted.)
   *
   * Sentinels point a replica that replicates from an unexpected address back
   * at the master (+fix-slave-config) some time after `failover-timeout`
   * (10-20 s with 5 s), so that is raised to an hour until {@link killMaster}
   * or {@link resumeReplication}: end a pause with those, not `master.kill()`.
   */
  pauseReplication(): Promise<void>;
  /** Lets the held writes through and replicates directly again. */
  resumeReplication(): Promise<void>;
  /**
   * SIGKILLs the master and waits until it exited; after
   * {@link pauseReplication}, drops the writes the replica has not got.
   */
  killMaster(): Promise<void>;
  /**
   * Waits until every running (and not frozen) Sentinel reports a new master
   * address and that server answers as a master; resolves with the address.
   *
   * @throws Error after `timeoutMs` (default 30 s).
   */
  waitForFailover(timeoutMs?: number): Promise<SentinelAddress>;
  /** Stops the Sentinels, then the servers. Idempotent. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 15_000;
const WAIT_FAILOVER_MS = 30_000;
const SENTINEL_FAILOVER_TIMEOUT = 5_000;
const PAUSED_SENTINEL_FAILOVER_TIMEOUT = 3_600_000;
const REPLICATION_ARGS = ['--repl-diskless-sync-delay', '0'];

/**
 * Starts a master, its replica and the Sentinels monitoring them, and resolves
 * once every Sentinel knows the replica and all other Sentinels. Stop it with
 * {@link SentinelGroup.stop}.
 */
export async function startSentinelGroup(
  options: SentinelGroupOptions = {},
): Promise<SentinelGroup> {
  const {
    sentinels: count = 3,
    name = 'mymaster',
    downAfterMs = 1_000,
  } = options;
  const quorum = options.quorum ?? Math.floor(count / 2) + 1;
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`sentinels must be a positive integer, got ${count}`);
  }
  const servers: RedisServerHandle[] = [];
  try {
    const master = await startRedisServer({ extraArgs: REPLICATION_ARGS });
    servers.push(master);
    const replica = await startRedisServer({
      extraArgs: [
        ...REPLICATION_ARGS,
        '--replicaof',
        HOST,
        String(master.port),
      ],
    });
    servers.push(replica);
    await waitForReplica('the replica to sync', replica, master.port);
    const config = [
      `sentinel monitor ${name} ${HOST} ${master.port} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${SENTINEL_FAILOVER_TIMEOUT}`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n');
    const started = await Promise.allSettled(
      Array.from({ length: count }, () =>
        startRedisServer({ config, extraArgs: ['--sentinel'] }),
      ),
    );
    const sentinels = started.flatMap((result) =>
      result.status === 'fulfilled' ? [result.value] : [],
    );
    servers.push(...sentinels);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    await Promise.all(
      sentinels.map((sentinel) =>
        call(sentinel.port, 'SENTINEL', 'DEBUG', 'publish-period', 200),
      ),
    );
    await waitUntil('the Sentinels to meet', START_TIMEOUT_MS, async () => {
      const states = await Promise.all(
        sentinels.map((sentinel) => masterState(sentinel.port, name)),
      );
      return states.every(
        (state) =>
          state.flags === 'master' &&
          state['num-slaves'] === '1' &&
          state['num-other-sentinels'] === String(count - 1),
      );
    });
    return new ManagedSentinelGroup(name, master, replica, sentinels);
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()));
    throw error;
  }
}

class ManagedSentinelGroup implements SentinelGroup {
  readonly sentinels: SentinelAddress[];
  private proxy?: TcpProxy;
  private stopping?: Promise<void>;

  constructor(
    readonly name: string,
    public master: RedisServerHandle,
    public replica: RedisServerHandle,
    readonly sentinelServers: RedisServerHandle[],
  ) {
    this.sentinels = sentinelServers.map(({ port }) => ({ host: HOST, port }));
  }

  async pauseReplication(): Promise<void> {
    if (this.proxy) return;
    const { master, replica } = this;
    if (replica.pid() === undefined || master.pid() === undefined) {
      throw new Error('pauseReplication() needs a running master and replica');
    }
    await this.setFailoverTimeout(PAUSED_SENTINEL_FAILOVER_TIMEOUT);
    const proxy = await startTcpProxy({ targetPort: master.port });
    this.proxy = proxy;
    await call(replica.port, 'REPLICAOF', HOST, proxy.port);
    await waitForReplica(
      'the replica to sync through the proxy',
      replica,
      proxy.port,
      master.port,
    );
    proxy.freeze();
  }

  async resumeReplication(): Promise<void> {
    const { proxy, master, replica } = this;
    if (!proxy) return;
    proxy.thaw();
    await waitForReplica(
      'the replica to catch up',
      replica,
      proxy.port,
      master.port,
    );
    await call(replica.port, 'REPLICAOF', HOST, master.port);
    await waitForReplica('the replica to sync', replica, master.port);
    this.proxy = undefined;
    await proxy.close();
    await this.setFailoverTimeout(SENTINEL_FAILOVER_TIMEOUT);
  }

  async killMaster(): Promise<void> {
    const { proxy, master, replica } = this;
    if (proxy) {
      const info = String(await call(replica.port, 'INFO', 'replication'));
      if (infoField(info, 'master_port') !== String(proxy.port)) {
        throw new Error(
          'The paused replica no longer replicates through the proxy, so it ' +
            'caught up (did a Sentinel point it back at the master?)',
        );
      }
    }
    await master.kill();
    if (!proxy) return;
    this.proxy = undefined;
    await proxy.close();
    await this.setFailoverTimeout(SENTINEL_FAILOVER_TIMEOUT);
  }

  async waitForFailover(
    timeoutMs = WAIT_FAILOVER_MS,
  ): Promise<SentinelAddress> {
    const oldPort = this.master.port;
    let port = 0;
    await waitUntil('the Sentinels to fail over', timeoutMs, async () => {
      const running = this.sentinelServers.filter((s) => s.pid() !== undefined);
      const addresses = await Promise.all(
        running.map((sentinel) =>
          call(sentinel.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.name),
        ),
      );
      const ports = new Set(
        addresses.map((address) => Number((address as string[])[1])),
      );
      if (ports.size !== 1) return false;
      [port] = ports;
      if (port === oldPort) return false;
      const role = (await call(port, 'ROLE')) as unknown[];
      return role[0] === 'master';
    });
    if (port === this.replica.port) {
      [this.master, this.replica] = [this.replica, this.master];
    }
    return { host: HOST, port };
  }

  private async setFailoverTimeout(ms: number): Promise<void> {
    await Promise.all(
      this.sentinelServers
        .filter((sentinel) => sentinel.pid() !== undefined)
        .map((sentinel) =>
          call(
            sentinel.port,
            'SENTINEL',
            'SET',
            this.name,
            'failover-timeout',
            ms,
          ),
        ),
    );
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.proxy?.close();
      await Promise.all(
        this.sentinelServers.map((sentinel) => sentinel.stop()),
      );
      await Promise.all([this.master.stop(), this.replica.stop()]);
    })();
    return this.stopping;
  }
}

/**
 * Whether `replica` replicates from `port` with a live link and has everything
 * the master (on `masterPort`, by default `port`) sent so far.
 */
/**
 * Waits until `replica` is linked to the master through `port` and has
 * everything the master had written when the wait began. Not "the same
 * offset as the master": under constant writes (a contention run) the two
 * are seldom equal at the moment of looking.
 */
async function waitForReplica(
  what: string,
  replica: RedisServerHandle,
  port: number,
  masterPort = port,
): Promise<void> {
  const masterInfo = String(await call(masterPort, 'INFO', 'replication'));
  const target = Number(infoField(masterInfo, 'master_repl_offset') ?? 0);
  await waitUntil(what, START_TIMEOUT_MS, async () => {
    const info = String(await call(replica.port, 'INFO', 'replication'));
    return (
      infoField(info, 'master_port') === String(port) &&
      infoField(info, 'master_link_status') === 'up' &&
      Number(infoField(info, 'slave_repl_offset') ?? -1) >= target
    );
  });
}

async function masterState(
  port: number,
  name: string,
): Promise<Record<string, string>> {
  const reply = (await call(port, 'SENTINEL', 'MASTER', name)) as string[];
  const state: Record<string, string> = {};
  for (let i = 0; i + 1 < reply.length; i += 2) state[reply[i]] = reply[i + 1];
  return state;
}
