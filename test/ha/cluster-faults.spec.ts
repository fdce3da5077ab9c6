/**
 * Fault suite, Redis Cluster: contention on a few keys while a master is
 * killed (its replica takes over) and while a slot moves to another master.
 * The fenced resource is the referee; FAULT_SECONDS lengthens each run.
 */
import { Cluster } from 'ioredis';
import type { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import {
  contentionService,
  printFaultTable,
  runContention,
  type ContentionReport,
} from '../support/contention.js';
import {
  startRedisCluster,
  type RedisCluster,
} from '../support/redis-cluster.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 3);
const keys = ['cart', 'coupon', 'stock', 'order'];
const rows: { scenario: string; faults: string; report: ContentionReport }[] =
  [];

afterAll(() => {
  printFaultTable('Redis Cluster (3 masters)', rows);
});

function openServices(cluster: RedisCluster, count: number): LockService[] {
  return Array.from({ length: count }, () =>
    contentionService(
      new Cluster(cluster.startupNodes, {
        redisOptions: { maxRetriesPerRequest: 1 },
      }),
    ),
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('a master killed during contention: its replica takes over, no stale write is accepted, tokens keep rising', async () => {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  const services = openServices(cluster, 3);
  try {
    const shard = cluster.masters.findIndex((master) =>
      master.slots.some(
        ([first, last]) =>
          cluster.slotOf('lock:{coupon}') >= first &&
          cluster.slotOf('lock:{coupon}') <= last,
      ),
    );
    const report = await runContention({
      services,
      keys,
      loopsPerService: 4,
      until: (async () => {
        await pause((seconds * 1000) / 3);
        await cluster.killMaster(shard);
        await cluster.waitForFailover();
        await pause((seconds * 1000) / 3);
      })(),
    });
    rows.push({ scenario: 'master killed', faults: '1 failover', report });
    expect(report.staleAccepted).toBe(0);
    expect(report.tokensRose).toBe(true);
    expect(report.acquired).toBeGreaterThan(100);
  } finally {
    await Promise.all(services.map((locks) => locks.close()));
    await cluster.stop();
  }
}, 90_000);

it('a slot moved to another master during contention: no overlap, tokens keep rising', async () => {
  const cluster = await startRedisCluster({ masters: 3 });
  const services = openServices(cluster, 3);
  try {
    const slot = cluster.slotOf('lock:{stock}');
    const from = cluster.masters.findIndex((master) =>
      master.slots.some(([first, last]) => slot >= first && slot <= last),
    );
    const report = await runContention({
      services,
      keys,
      loopsPerService: 4,
      until: (async () => {
        await pause((seconds * 1000) / 3);
        await cluster.migrateSlot(slot, (from + 1) % 3);
        await pause((seconds * 1000) / 3);
        await cluster.migrateSlot(slot, from);
        await pause((seconds * 1000) / 3);
      })(),
    });
    rows.push({ scenario: 'slot migrated', faults: '2 migrations', report });
    expect(report.overlaps).toBe(0);
    expect(report.staleAccepted).toBe(0);
    expect(report.tokensRose).toBe(true);
    expect(report.acquired).toBeGreaterThan(100);
  } finally {
    await Promise.all(services.map((locks) => locks.close()));
    await cluster.stop();
  }
}, 90_000);
