/**
 * Fault suite, one Redis: contention on a few keys while the server freezes
 * (SIGSTOP, as a hung host) and thaws, and while it restarts empty. Holders
 * paused or killed are covered by libs/distributed-lock/test/faults/.
 */
import { Redis } from 'ioredis';
import type { LockService } from '../../libs/distributed-lock/src/lock-service/lock.service.js';
import {
  contentionService,
  printFaultTable,
  runContention,
  type ContentionReport,
} from '../support/contention.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

const seconds = Number(process.env.FAULT_SECONDS ?? 3);
const keys = ['cart', 'coupon', 'stock'];
const rows: { scenario: string; faults: string; report: ContentionReport }[] =
  [];

afterAll(() => {
  printFaultTable('One Redis', rows);
});

function openServices(server: RedisServerHandle, count: number): LockService[] {
  return Array.from({ length: count }, () =>
    contentionService(new Redis(server.url, { maxRetriesPerRequest: 1 }), 500),
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

it.each([
  {
    scenario: 'Redis frozen 1.5 s, then thawed',
    faults: '1 freeze',
    fault: async (server: RedisServerHandle) => {
      await server.freeze();
      await pause(1500);
      await server.thaw();
    },
  },
  {
    scenario: 'Redis restarted empty',
    faults: '1 restart, all data lost',
    fault: (server: RedisServerHandle) => server.restart(),
  },
])(
  '$scenario: no stale write is accepted, tokens keep rising, locks work again after',
  async ({ scenario, faults, fault }) => {
    const server = await startRedisServer();
    const services = openServices(server, 3);
    try {
      const report = await runContention({
        services,
        keys,
        loopsPerService: 3,
        until: (async () => {
          await pause((seconds * 1000) / 3);
          await fault(server);
          await pause((seconds * 1000) / 2);
        })(),
      });
      rows.push({ scenario, faults, report });
      expect(report.staleAccepted).toBe(0);
      expect(report.tokensRose).toBe(true);
      expect(report.acquired).toBeGreaterThan(100);
      // Working again: every service takes every key.
      for (const locks of services)
        for (const key of keys) await (await locks.acquire(key)).release();
    } finally {
      await Promise.all(services.map((locks) => locks.close()));
      await server.stop();
    }
  },
  60_000,
);
