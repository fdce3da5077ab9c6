import { once } from 'node:events';
import net from 'node:net';
import { createLockService } from '../../../test/support/lock-fixtures.js';
import { AppInstance, healthStatus } from '../loadtest/instances.js';
import { runLoadTest } from '../loadtest/run-load-test.js';
import {
  buy,
  checkInvariants,
  createCoupon,
  useSaleBackends,
  findTestPostgres,
  startApp,
} from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)(
  'several app instances as separate processes',
  () => {
    const sale = useSaleBackends(postgres!);

    it('sells a stock of 50 to exactly 50 of 500 users sending 2,000 requests over 3 instances', async () => {
      const report = await runLoadTest({
        redisUrl: sale.redisServer.url,
        databaseUrl: sale.db.url,
        instances: 3,
        couponStock: 50,
        users: 500,
        requests: 2_000,
        concurrency: 100,
        // 10 units sold first, for another coupon, and left out of the report.
        warmup: 200,
      });

      expect(report.invariants.filter((invariant) => !invariant.ok)).toEqual(
        [],
      );
      expect(report.ok).toBe(true);
      expect(report).toMatchObject({
        sent: 2_000,
        finished: 2_000,
        successes: 50,
        successUsers: 50,
        duplicateSuccessUsers: 0,
        serverErrors: 0,
        transportErrors: 0,
        sale: {
          initialStock: 50,
          ordersInDatabase: 50,
          distinctUsersInDatabase: 50,
          remainingInRedis: 0,
          buyersInRedis: 50,
          usersWithTwoOrders: [],
        },
      });
      // Everything else was a refusal: sold out, or this user already bought.
      expect(Object.keys(report.outcomes).toSorted()).toEqual(
        expect.arrayContaining(['201', '409 SOLD_OUT']),
      );
      for (const outcome of Object.keys(report.outcomes)) {
        expect(['201', '409 SOLD_OUT', '409 ALREADY_PURCHASED']).toContain(
          outcome,
        );
      }
      // The three processes shared the requests, and each one sold some.
      expect(report.instances).toHaveLength(3);
      for (const instance of report.instances) {
        expect(instance.responses).toBeGreaterThanOrEqual(600);
        expect(instance.starts).toBe(1);
      }
      expect(new Set(report.instances.map((i) => i.port)).size).toBe(3);
      // Where the time went, from the instances' metrics: the sale's 50
      // purchases alone (the warm-up's 10 are taken off), sold in turns of
      // the coupon's lock, each turn with its script and database steps.
      const split = Object.fromEntries(
        report.timeSplit.map((row) => [row.part.trim(), row]),
      );
      expect(split['answered on the server, 201']?.count).toBe(50);
      const turns = split['purchases sold in the turn'];
      expect(turns?.count).toBeGreaterThanOrEqual(1);
      // Turns that sold nothing new (everyone there had bought, or it sold
      // out) count too: at least the 50 sold units over all of them.
      expect(turns!.mean * turns!.count).toBeGreaterThanOrEqual(50);
      expect(split['database statement']?.count).toBeGreaterThanOrEqual(1);
      expect(split['database statement']!.count).toBeLessThanOrEqual(
        turns!.count,
      );
      expect(split['lock held by a turn']?.count).toBeGreaterThanOrEqual(
        turns!.count,
      );
      for (const row of report.timeSplit) {
        expect(row.mean).toBeGreaterThan(0);
        if (row.unit === 'ms') expect(row.mean).toBeLessThan(15_000);
      }
      // The database agrees with the report, read independently.
      await checkInvariants(sale.db, 0, report.couponId);
    }, 120_000);
  },
);

describe.skipIf(!postgres)('SECKILL_LOCK=off (load tests only)', () => {
  const sale = useSaleBackends(postgres!);

  it('sells without taking the coupon lock, and with it by default', async () => {
    const other = createLockService(sale.redisServer.url);
    const [locked, unlocked] = await Promise.all([
      startApp({
        redisUrl: sale.redisServer.url,
        databaseUrl: sale.db.url,
        seckill: { waitTime: 300 },
      }),
      startApp({
        redisUrl: sale.redisServer.url,
        databaseUrl: sale.db.url,
        seckill: { waitTime: 300, lock: false },
      }),
    ]);
    try {
      const couponId = await createCoupon(locked.http, { stock: 2 });
      // Someone else holds the coupon's lock for the whole test.
      const held = await other.locks.acquire(`coupon:${couponId}`, {
        leaseTime: 20_000,
      });

      const waited = await buy(locked.http, couponId, 'alice').expect(429);
      expect(waited.body).toMatchObject({ code: 'BUSY' });
      await buy(unlocked.http, couponId, 'alice').expect(201);
      await buy(unlocked.http, couponId, 'alice').expect(409);
      await buy(unlocked.http, couponId, 'bob').expect(201);
      const late = await buy(unlocked.http, couponId, 'carol').expect(409);
      expect(late.body).toMatchObject({ code: 'SOLD_OUT' });

      await held.release();
      await checkInvariants(sale.db, 0, couponId);
    } finally {
      await Promise.all([locked.close(), unlocked.close()]);
      await other.close();
    }
  });

  it('starts an instance on another port when its own was taken by an outgoing connection', async () => {
    // A connection's local port blocks a server from listening on it: one of
    // the instances' own pool connections can take the port chosen for
    // another instance.
    const held = net.connect(
      Number(new URL(sale.redisServer.url).port),
      '127.0.0.1',
    );
    await once(held, 'connect');
    const taken = held.localPort!;
    const lines: string[] = [];
    const instance = new AppInstance({
      index: 0,
      port: taken,
      env: {
        ...process.env,
        REDIS_URL: sale.redisServer.url,
        DATABASE_URL: sale.db.url,
        LOCAL_REDIS: '0',
        NO_COLOR: '1',
      },
      fromBuild: false,
      startTimeoutMs: 60_000,
      onLine: (_index, line) => lines.push(line),
    });
    try {
      await instance.start();
      expect(instance.port).not.toBe(taken);
      expect(await healthStatus(instance.port)).toBe(200);
      expect(lines.join('\n')).toContain('EADDRINUSE');
    } finally {
      await instance.stop();
      held.destroy();
    }
  });
});
