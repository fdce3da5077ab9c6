/**
 * Fault suite, Sentinel: one master, one replica, three Sentinels. The
 * replica is left behind (its replication held in a proxy) before the master
 * is killed, so the failover loses the last writes, fencing counters
 * included. FAULT_SECONDS lengthens the contention run.
 */
import { Redis } from 'ioredis';
import { RedisLockBackend } from '../../libs/distributed-lock/src/backends/redis/redis-lock-backend.js';
import { LockBackendError } from '../../libs/distributed-lock/src/errors/lock-errors.js';
import { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import {
  contentionService,
  printFaultTable,
  runContention,
  type ContentionReport,
} from '../support/contention.js';
import {
  startSentinelGroup,
  type SentinelGroup,
} from '../support/redis-sentinel.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 3);
const rows: { scenario: string; faults: string; report: ContentionReport }[] =
  [];

afterAll(() => {
  printFaultTable('Sentinel (1 master, 1 replica, 3 Sentinels)', rows);
});

function openService(group: SentinelGroup): LockService {
  return contentionService(
    new Redis({
      sentinels: group.sentinels,
      name: group.name,
      maxRetriesPerRequest: 1,
    }),
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function fenceOnce(locks: LockService, key: string): Promise<number> {
  const handle = await locks.acquire(key, { waitTime: 10_000 });
  try {
    return await handle.fence();
  } finally {
    await handle.release();
  }
}

/** Runs `attempt` until ioredis has found the new master (calls fail with LockBackendError until then). */
async function afterReconnect<T>(attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof LockBackendError) || Date.now() > deadline)
        throw error;
      await pause(100);
    }
  }
}

it('fencing tokens never go backwards after a failover that lost the last writes', async () => {
  const group = await startSentinelGroup();
  const locks = openService(group);
  try {
    const replicated: number[] = [];
    for (let i = 0; i < 5; i++)
      replicated.push(await fenceOnce(locks, 'coupon'));
    await pause(200);
    await group.pauseReplication();
    const lost: number[] = [];
    for (let i = 0; i < 50; i++) lost.push(await fenceOnce(locks, 'coupon'));
    await group.killMaster();
    await group.waitForFailover();
    const after = await afterReconnect(() => fenceOnce(locks, 'coupon'));
    expect(after).toBeGreaterThan(Math.max(...lost));
  } finally {
    await locks.close();
    await group.stop();
  }
}, 90_000);

it('contention across a failover with a replication gap: no stale write accepted, tokens keep rising', async () => {
  const group = await startSentinelGroup();
  const services = [openService(group), openService(group), openService(group)];
  try {
    const report = await runContention({
      services,
      keys: ['cart', 'coupon', 'stock'],
      loopsPerService: 3,
      until: (async () => {
        await pause((seconds * 1000) / 3);
        await group.pauseReplication();
        await pause(300);
        await group.killMaster();
        await group.waitForFailover();
        await pause((seconds * 1000) / 3);
      })(),
    });
    rows.push({
      scenario: 'master killed, replica behind',
      faults: '1 failover, writes lost',
      report,
    });
    expect(report.staleAccepted).toBe(0);
    expect(report.tokensRose).toBe(true);
    expect(report.acquired).toBeGreaterThan(50);
  } finally {
    await Promise.all(services.map((locks) => locks.close()));
    await group.stop();
  }
}, 120_000);

it('with replicaAcks, a lock is granted only once the replica has it; with replication held, the acquisition fails and leaves nothing held', async () => {
  const group = await startSentinelGroup();
  const client = new Redis({
    sentinels: group.sentinels,
    name: group.name,
    maxRetriesPerRequest: 1,
  });
  client.on('error', () => undefined);
  const locks = new LockService({
    backend: new RedisLockBackend({
      client,
      ownsClient: true,
      replicaAcks: { replicas: 1, timeoutMs: 1000 },
    }),
    keyPrefix: 'lock:',
    watchdogLeaseTime: 3000,
    waitTime: 0,
    maxKeyLength: 512,
  });
  try {
    const replica = new Redis(group.replica.url);
    const handle = await locks.acquire('acked');
    expect(await replica.get('lock:{acked}')).not.toBeNull();
    await handle.release();
    replica.disconnect();
    await group.pauseReplication();
    const startedAt = performance.now();
    await expect(locks.acquire('unacked')).rejects.toThrow(
      /reached 0 of 1 replicas within 1000 ms/,
    );
    expect(performance.now() - startedAt).toBeLessThan(2500);
    expect(await locks.isLocked('unacked')).toBe(false);
  } finally {
    await locks.close();
    await group.stop();
  }
}, 90_000);
