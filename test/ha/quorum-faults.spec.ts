/**
 * Fault suite, Redlock quorum over 5 independent servers: contention while
 * one node, then two, are SIGKILLed and restarted empty. Restarted nodes stay
 * out of the vote for maxLeaseMs (the delayed-restart rule).
 */
import { Redis } from 'ioredis';
import { QuorumLockBackend } from '../../libs/distributed-lock/src/backends/quorum/quorum-lock-backend.js';
import type { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import {
  contentionLocks,
  printFaultTable,
  runContention,
  type ContentionReport,
} from '../support/contention.js';
import { startRedisNodes, type RedisNodes } from '../support/redis-nodes.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 4);
const rows: { scenario: string; faults: string; report: ContentionReport }[] =
  [];

afterAll(() => {
  printFaultTable('Redlock quorum (5 independent servers)', rows);
});

function openService(nodes: RedisNodes): LockService {
  const clients = nodes.urls.map((url) => {
    const client = new Redis(url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    return client;
  });
  return contentionLocks(
    new QuorumLockBackend({
      nodes: clients,
      ownsClients: true,
      maxLeaseMs: 3000,
    }),
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

it.each([
  { scenario: '1 of 5 killed, restarted empty', victims: [1] },
  { scenario: '2 of 5 killed, restarted empty', victims: [2, 4] },
])(
  '$scenario during contention: no overlap, no stale write accepted, tokens keep rising',
  async ({ scenario, victims }) => {
    const nodes = await startRedisNodes(5);
    const services = [
      openService(nodes),
      openService(nodes),
      openService(nodes),
    ];
    try {
      const report = await runContention({
        services,
        keys: ['cart', 'coupon', 'stock'],
        loopsPerService: 3,
        until: (async () => {
          await pause((seconds * 1000) / 4);
          await Promise.all(victims.map((i) => nodes.kill(i)));
          await pause((seconds * 1000) / 4);
          await Promise.all(victims.map((i) => nodes.restart(i)));
          await pause((seconds * 1000) / 2);
        })(),
      });
      rows.push({
        scenario,
        faults: `${victims.length} SIGKILL + restart`,
        report,
      });
      expect(report.overlaps).toBe(0);
      expect(report.staleAccepted).toBe(0);
      expect(report.tokensRose).toBe(true);
      expect(report.acquired).toBeGreaterThan(50);
    } finally {
      await Promise.all(services.map((locks) => locks.close()));
      await nodes.stop();
    }
  },
  60_000,
);
