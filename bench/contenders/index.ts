import { installedVersion } from './versions.js';
import type {
  Contender,
  ContenderContext,
  ContenderInstance,
  ContenderModule,
} from './types.js';

export type { Contender } from './types.js';

const v = {
  ioredis: installedVersion('ioredis'),
  ioredis4: installedVersion('ioredis4'),
  nest: installedVersion('@nestjs/core'),
  redlock4: installedVersion('redlock4'),
  redlock5: installedVersion('redlock5'),
  sesame: installedVersion('@sesamecare-oss/redlock'),
  semaphore: installedVersion('redis-semaphore'),
};

// Each module is imported on first use only (see Contender.load).
const rawModule = (): Promise<ContenderModule> => import('./raw.js');
const rawFifoModule = (): Promise<ContenderModule> => import('./raw-fifo.js');
const oursModule = (): Promise<ContenderModule> => import('./ours.js');
const peersModule = (): Promise<ContenderModule> => import('./peers.js');
const rawSemaphoreModule = (): Promise<ContenderModule> =>
  import('./raw-semaphore.js');
const rawReadWriteLockModule = (): Promise<ContenderModule> =>
  import('./raw-rwlock.js');

const ours = `nest-distributed-lock (this repo) on ioredis ${v.ioredis}, Nest ${v.nest}`;
const defaultRetries =
  'defaults: retryDelay 200, retryJitter 100, retryCount 10';
const tunedRetries = 'retryDelay 10, retryJitter 5, retryCount 200';

function oursContender(
  id: string,
  label: string,
  detail: string,
  comparedWith?: string,
): Contender {
  return {
    id,
    label,
    detail: `${ours}; ${detail}`,
    kind: 'ours',
    library: 'ours',
    comparedWith,
    load: oursModule,
  };
}

/** A Redlock-style peer at its defaults or with the 10 ms retries of C. */
function redlockPeer(
  name: 'redlock4' | 'redlock5' | 'sesame',
  tuned: boolean,
): Contender {
  const packageLabel = {
    redlock4: `redlock ${v.redlock4}`,
    redlock5: `redlock ${v.redlock5}`,
    sesame: `@sesamecare-oss/redlock ${v.sesame}`,
  }[name];
  const client =
    name === 'redlock4'
      ? `ioredis ${v.ioredis4} (it calls the v4 callback API)`
      : `ioredis ${v.ioredis}`;
  return {
    id: tuned ? `${name}-10ms` : name,
    label: `${packageLabel}${tuned ? ', 10 ms retry' : ''}`,
    detail: `${packageLabel} on ${client}; ${tuned ? tunedRetries : defaultRetries}`,
    kind: 'peer',
    library: {
      redlock4: 'redlock@4',
      redlock5: 'redlock@5',
      sesame: '@sesamecare-oss/redlock',
    }[name],
    load: peersModule,
  };
}

const all: readonly Contender[] = [
  {
    id: 'raw',
    label: 'raw ioredis (baseline)',
    detail: `SET NX PX + EVALSHA compare-and-delete, 1 ms polling; ioredis ${v.ioredis}`,
    kind: 'baseline',
    library: 'ioredis',
    load: rawModule,
  },
  {
    id: 'raw-fifo',
    label: 'raw FIFO hand-off (yardstick)',
    detail: `one script acquires with SET NX PX or queues the token (RPUSH); the release script hands the lock to the head of the queue (SET to its token) and PUBLISHes it, one subscriber connection per process; ioredis ${v.ioredis}`,
    kind: 'baseline',
    library: 'ioredis',
    load: rawFifoModule,
  },
  {
    id: 'raw-quorum',
    label: 'raw quorum (baseline)',
    detail: `SET NX PX on all nodes in parallel, majority, EVALSHA release on all; ioredis ${v.ioredis}`,
    kind: 'baseline',
    library: 'ioredis',
    load: rawModule,
  },
  oursContender(
    'ours-service',
    'ours: LockService',
    'module defaults (watchdog lease)',
  ),
  oursContender(
    'ours-service-lease',
    'ours: LockService, explicit leaseTime',
    'leaseTime = the benchmark TTL',
  ),
  oursContender(
    'ours-service-fenced',
    'ours: LockService, fence: true',
    'module defaults (watchdog lease); acquire(key, { fence: true }): the fencing token comes with the grant (read from handle.fencingToken)',
    'ours-service',
  ),
  oursContender(
    'ours-service-uncoalesced',
    'ours: LockService, coalesceWrites: false',
    'module defaults but coalesceWrites: false (one socket write per command, as ioredis does)',
    'ours-service',
  ),
  oursContender(
    'ours-decorator',
    'ours: @DistributedLock',
    "@DistributedLock('<0>') on a provider method, module defaults",
  ),
  oursContender(
    'ours-decorator-unscoped',
    'ours: @DistributedLock, lock scope off (diagnostic)',
    "@DistributedLock('<0>') as above, in a process where LockHandle.run calls the method without entering the lock scope (no AsyncLocalStorage, so no currentLock() or reentrancy): what the scope costs, not a configuration",
    'ours-decorator',
  ),
  oursContender(
    'ours-quorum',
    'ours: LockService, quorum mode',
    'quorum mode (nodes: every URL); leaseTime = the benchmark TTL',
  ),
  redlockPeer('redlock4', false),
  redlockPeer('redlock4', true),
  redlockPeer('redlock5', false),
  redlockPeer('redlock5', true),
  redlockPeer('sesame', false),
  redlockPeer('sesame', true),
  {
    id: 'semaphore-mutex',
    label: `redis-semaphore ${v.semaphore} Mutex`,
    detail: `redis-semaphore ${v.semaphore} Mutex on ioredis ${v.ioredis}; defaults (retryInterval 10 ms, acquireTimeout 10 s, refresh every 0.8 x lockTimeout)`,
    kind: 'peer',
    library: 'redis-semaphore',
    load: peersModule,
  },
  {
    id: 'semaphore-redlock-mutex',
    label: `redis-semaphore ${v.semaphore} RedlockMutex`,
    detail: `redis-semaphore ${v.semaphore} RedlockMutex on ioredis ${v.ioredis}; defaults (retryInterval 10 ms, acquireTimeout 10 s)`,
    kind: 'peer',
    library: 'redis-semaphore',
    load: peersModule,
  },
  {
    id: 'raw-semaphore',
    label: 'raw ZSET semaphore (baseline)',
    detail: `one EVALSHA script drops expired holders from a sorted set (scored by expiry on the server's clock) and adds the token when fewer than the limit hold one; ZREM releases; 1 ms polling, no queue; ioredis ${v.ioredis}`,
    kind: 'baseline',
    library: 'ioredis',
    load: rawSemaphoreModule,
  },
  oursContender(
    'ours-semaphore',
    'ours: SemaphoreService',
    'SemaphoreService.acquire(key, { limit, permits: 1 }), module defaults (watchdog lease, FIFO queue, pub/sub wake-ups)',
  ),
  {
    id: 'raw-rwlock',
    label: 'raw read-write lock (baseline)',
    detail: `one EVALSHA script per verb: a reader joins a sorted set of tokens (scored by expiry on the server's clock) when no writer key is set and no writer-waiting key is; a writer SETs the writer key PX when no writer and no unexpired reader holds it, else sets writer-waiting PX 50 ms (writer-preferring); ZREM / compare-and-delete release; 1 ms polling, no queue; ioredis ${v.ioredis}`,
    kind: 'baseline',
    library: 'ioredis',
    load: rawReadWriteLockModule,
  },
  oursContender(
    'ours-rwlock',
    'ours: ReadWriteLockService',
    'ReadWriteLockService.read(key) / write(key), module defaults (watchdog lease, FIFO queue, a queued writer holds back later readers, pub/sub wake-ups)',
  ),
  oursContender(
    'ours-rwlock-mutex',
    'ours: LockService for reads too',
    'LockService.acquire(key) for every read and write (reads exclusive too), module defaults (watchdog lease)',
  ),
  {
    id: 'semaphore-semaphore',
    label: `redis-semaphore ${v.semaphore} Semaphore`,
    detail: `redis-semaphore ${v.semaphore} Semaphore on ioredis ${v.ioredis}; defaults (retryInterval 10 ms, acquireTimeout 10 s, no queue)`,
    kind: 'peer',
    library: 'redis-semaphore',
    load: peersModule,
  },
];

/** Every contender by id (workers look them up by it). */
export const contenders: ReadonlyMap<string, Contender> = new Map(
  all.map((c) => [c.id, c]),
);

export function contender(id: string): Contender {
  const found = contenders.get(id);
  if (!found) throw new Error(`Unknown contender "${id}"`);
  return found;
}

/** Imports contender `id`'s module (only that one) and opens an instance. */
export async function openContender(
  id: string,
  context: ContenderContext,
): Promise<ContenderInstance> {
  const { openers } = await contender(id).load();
  const open = openers[id];
  if (!open) throw new Error(`Contender "${id}" is missing from its module`);
  return open(context);
}

/** Uncontended scenarios (A, B): retries never happen, so the tuned variants would repeat the defaults. */
export const uncontendedIds = [
  'raw',
  'ours-service',
  'ours-service-lease',
  'ours-service-fenced',
  'ours-service-uncoalesced',
  'ours-decorator',
  'ours-decorator-unscoped',
  'redlock4',
  'redlock5',
  'sesame',
  'semaphore-mutex',
  'semaphore-redlock-mutex',
];

/** Contention (C): the two raw yardsticks, ours, and the peers at their defaults and with 10 ms retries. */
export const contentionIds = [
  'raw',
  'raw-fifo',
  'ours-service',
  'ours-decorator',
  'redlock4',
  'redlock4-10ms',
  'redlock5',
  'redlock5-10ms',
  'sesame',
  'sesame-10ms',
  'semaphore-mutex',
  'semaphore-redlock-mutex',
];

/** Semaphore (I): one permit each of a few-permit semaphore, many callers. */
export const semaphoreIds = [
  'raw-semaphore',
  'ours-semaphore',
  'semaphore-semaphore',
];

/** Read-write lock (J): a readers-heavy mix of reads and writes on one lock. */
export const readWriteLockIds = [
  'raw-rwlock',
  'ours-rwlock',
  'ours-rwlock-mutex',
];

/** Quorum (D): ours and the peers' Redlock modes. */
export const quorumIds = [
  'raw-quorum',
  'ours-quorum',
  'redlock4',
  'redlock5',
  'sesame',
  'semaphore-redlock-mutex',
];
