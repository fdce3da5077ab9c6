/**
 * Set-up of the quorum backend's specs: throwaway Redis masters, backends
 * that each stand for one process (their own clients), lock services on
 * them, and a look at the servers' command counts. Specs register it all
 * with {@link useQuorumNodes}.
 */
import { Redis } from 'ioredis';
import { QuorumLockBackend } from '../../src/backends/quorum/quorum-lock-backend.js';
import type { QuorumLockBackendOptions } from '../../src/backends/quorum/quorum-options.js';
import { LockService } from '../../src/lock-service/lock.service.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

export { eventually, sleep } from '../../../../test/support/lock-fixtures.js';

/** Starts `count` independent Redis masters. */
export function startNodes(count: number): Promise<RedisServerHandle[]> {
  return Promise.all(Array.from({ length: count }, () => startRedisServer()));
}

/** A client as a lock process would open it: fails fast, reconnects fast. */
export function nodeClient(server: RedisServerHandle): Redis {
  const client = new Redis(server.url, {
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(times * 20, 200),
  });
  client.on('error', () => undefined);
  return client;
}

/** One "process": a backend on its own clients, and a service on it. */
export interface QuorumProcess {
  readonly backend: QuorumLockBackend;
  readonly clients: Redis[];
  readonly locks: LockService;
  readonly close: () => Promise<void>;
}

export interface ProcessOptions extends Omit<
  QuorumLockBackendOptions,
  'nodes' | 'ownsClients'
> {
  readonly watchdogLeaseTime?: number;
  readonly waitTime?: number;
  /** Binds holds without a lease to a process session with this TTL. */
  readonly sessionTtl?: number;
}

/** Tracks what a spec opened, to close it after each test. */
export class Opened {
  private readonly closers: Array<() => Promise<void>> = [];

  /** A backend (owning its clients) and a LockService on `servers`. */
  process(
    servers: readonly RedisServerHandle[],
    options: ProcessOptions = {},
  ): QuorumProcess {
    const { watchdogLeaseTime, waitTime, sessionTtl, ...backendOptions } =
      options;
    const clients = servers.map(nodeClient);
    const backend = new QuorumLockBackend({
      nodes: clients,
      ownsClients: true,
      ...backendOptions,
    });
    const locks = new LockService({
      backend,
      keyPrefix: 'lock:',
      watchdogLeaseTime: watchdogLeaseTime ?? 3_000,
      waitTime: waitTime ?? 5_000,
      sessionTtl,
      maxKeyLength: 512,
    });
    const close = (): Promise<void> => locks.close();
    this.closers.push(close);
    return { backend, clients, locks, close };
  }

  /** A plain client per server, for looking at keys and counters. */
  clients(servers: readonly RedisServerHandle[]): Redis[] {
    const clients = servers.map(nodeClient);
    this.closers.push(async () => {
      for (const client of clients) client.disconnect();
    });
    return clients;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.closers.splice(0).map((close) => close()));
  }
}

export interface QuorumNodesOptions {
  /** Starts 3 nodes for the file (`three`). */
  readonly three?: boolean;
  /** Starts 5 nodes for the file (`five`). */
  readonly five?: boolean;
  /** Opens a ready plain client per node of these before each test (`look`). */
  readonly look?: 'three' | 'five';
}

export interface QuorumNodes {
  /** The 3 nodes (with `three: true`). */
  readonly three: RedisServerHandle[];
  /** The 5 nodes (with `five: true`). */
  readonly five: RedisServerHandle[];
  /** A plain client per node of the test (with `look`), for looking at keys. */
  readonly look: Redis[];
  /** What the tests open, closed after each test. */
  readonly opened: Opened;
}

/** `value`, set up by a hook; a clear error when read outside a test. */
function need<T>(value: T | undefined, what: string): T {
  if (value === undefined)
    throw new Error(`${what} is set up in a hook: use it inside a test`);
  return value;
}

/**
 * Registers the hooks of a quorum spec in the calling file and returns its
 * parts: nodes started once for the file and stopped after it; after each
 * test, what it opened is closed, and every node is thawed, brought back
 * (empty) if the test killed it, and flushed.
 */
export function useQuorumNodes(options: QuorumNodesOptions): QuorumNodes {
  const opened = new Opened();
  let three: RedisServerHandle[] | undefined;
  let five: RedisServerHandle[] | undefined;
  let look: Redis[] | undefined;
  const all = () => [...(three ?? []), ...(five ?? [])];

  beforeAll(async () => {
    [three, five] = await Promise.all([
      options.three ? startNodes(3) : undefined,
      options.five ? startNodes(5) : undefined,
    ]);
  });

  if (options.look) {
    const of = options.look;
    beforeEach(async () => {
      look = opened.clients(need(of === 'three' ? three : five, of));
      await ready(look);
    });
  }

  afterEach(async () => {
    look = undefined;
    await opened.closeAll();
    await Promise.all(all().map((server) => server.thaw()));
    await Promise.all(
      all().map((server) =>
        server.pid() === undefined ? server.restart() : undefined,
      ),
    );
    const flush = opened.clients(all());
    await Promise.all(flush.map((client) => client.flushall()));
    await opened.closeAll();
  });

  afterAll(async () => {
    await Promise.all(all().map((server) => server.stop()));
  });

  return {
    get three() {
      return need(three, 'three');
    },
    get five() {
      return need(five, 'five');
    },
    get look() {
      return need(look, 'look');
    },
    opened,
  };
}

/** Waits until every client is connected and ready. */
export async function ready(clients: readonly Redis[]): Promise<void> {
  await Promise.all(clients.map((client) => client.ping()));
}

/** How often `command` ran on the server of `client` (INFO commandstats). */
export async function commandCalls(
  client: Redis,
  command: string,
): Promise<number> {
  const info = await client.info('commandstats');
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
  return match ? Number(match[1]) : 0;
}

/** A small seeded random number generator (mulberry32), for repeatable runs. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The p-th percentile (0..100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = values.toSorted((a, b) => a - b);
  const index = Math.min(
    sorted.length - 1,
    Math.floor((p / 100) * sorted.length),
  );
  return sorted[index];
}
