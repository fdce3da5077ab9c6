import { runLoadTest } from '../loadtest/run-load-test.js';
import {
  checkInvariants,
  useSaleBackends,
  findTestPostgres,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)(
  'an instance killed with SIGKILL in the middle of a sale',
  () => {
    const sale = useSaleBackends(postgres!);

    it('loses no successful order and sells nothing twice after its restart and reconciliation', async () => {
      // 800 users send 2,000 requests for 600 units: a quarter in, about 370
      // are sold when the last of 3 instances is killed; the rest sells out
      // after it came back.
      const report = await runLoadTest({
        redisUrl: sale.redisServer.url,
        databaseUrl: sale.db.url,
        instances: 3,
        couponStock: 600,
        users: 800,
        requests: 2_000,
        concurrency: 100,
        killOneAt: 0.25,
        restartDelayMs: 500,
      });

      expect(report.crash).toMatchObject({
        instance: 2,
        atRequest: 500,
        restartedAtMs: expect.any(Number),
      });
      expect(report.crash!.restartError).toBeUndefined();
      expect(report.instances.map((instance) => instance.starts)).toEqual([
        1, 1, 2,
      ]);
      // The sale was still going when the instance died.
      expect(report.crash!.killedAtMs).toBeLessThan(report.durationMs);
      expect(report.sale.ordersInDatabase).toBeGreaterThan(0);

      // The invariants, read from the database and Redis after the restart:
      // orders = stock - remaining, one order per user, each 201 in the database.
      expect(report.invariants.filter((invariant) => !invariant.ok)).toEqual(
        [],
      );
      expect(report.ok).toBe(true);
      expect(report.invariants.map((invariant) => invariant.name)).toContain(
        'every 201 has its order in the database',
      );
      expect(report.duplicateSuccessUsers).toBe(0);
      expect(report.sale.usersWithTwoOrders).toEqual([]);
      expect(report.sale.ordersInDatabase).toBeLessThanOrEqual(600);
      // A purchase cut off by the kill may have committed without its client
      // hearing of it, never the other way round.
      expect(report.sale.ordersInDatabase).toBeGreaterThanOrEqual(
        report.successes,
      );
      expect(report.sale.buyersInRedis).toBe(
        report.sale.distinctUsersInDatabase,
      );
      // The dead instance's requests failed as connection errors, not successes.
      expect(report.instances[2].errors).toBeGreaterThan(0);
      for (const outcome of Object.keys(report.outcomes)) {
        expect(outcome).toMatch(/^(201|409 \w+|429 BUSY|error \w+)$/);
      }
      await checkInvariants(
        sale.db,
        report.sale.remainingInRedis!,
        report.couponId,
      );
    }, 150_000);
  },
);
