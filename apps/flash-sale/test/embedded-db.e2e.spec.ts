import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { getFreePort } from '../../../test/support/ports.js';
import { spawnTs } from '../../../test/support/processes.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';
import { APP_RUNTIME, type AppRuntime } from '../src/app.runtime.js';
import {
  buy,
  createCoupon,
  startApp,
  type TestApp,
} from './support/harness.js';

/** Whether the app hosts the embedded database (else it connects to another's). */
const hosts = (app: TestApp) =>
  app.app.get<AppRuntime>(APP_RUNTIME).hostsEmbeddedDatabase;

/**
 * Without DATABASE_URL the app uses PGlite served on a fixed loopback port:
 * the first instance hosts it, the others connect, and all see one database.
 */
describe('the embedded PGlite database (no DATABASE_URL)', () => {
  let redisServer: RedisServerHandle;
  let dataDir: string;
  let port: number;
  const apps: TestApp[] = [];
  let standalone: ChildProcess | undefined;

  const boot = async () => {
    const app = await startApp({
      redisUrl: redisServer.url,
      databaseUrl: undefined,
      embeddedDb: { port, dataDir },
    });
    apps.push(app);
    return app;
  };

  beforeAll(async () => {
    [redisServer, dataDir, port] = await Promise.all([
      startRedisServer(),
      mkdtemp(path.join(os.tmpdir(), 'flash-sale-pglite-')),
      getFreePort(),
    ]);
  });

  afterAll(async () => {
    for (const app of apps.splice(0).toReversed()) await app.close();
    standalone?.kill('SIGKILL');
    await redisServer?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('lets two instances that start together share one database: one hosts it, the other connects', async () => {
    const [host, client] = await Promise.all([boot(), boot()]);

    const couponId = await createCoupon(host.http, { stock: 3 });
    const seen = await client.http.get(`/api/coupons/${couponId}`).expect(200);
    expect(seen.body).toMatchObject({ id: couponId, stock: 3, remaining: 3 });

    // Buyers spread over both instances share the stock.
    const responses = await Promise.all(
      ['a', 'b', 'c', 'd', 'e', 'a'].map((user, index) =>
        buy(index % 2 ? client.http : host.http, couponId, user),
      ),
    );
    expect(responses.filter((r) => r.status === 201)).toHaveLength(3);
    const orders = await host.http
      .get(`/api/coupons/${couponId}/orders`)
      .expect(200);
    expect(orders.body).toHaveLength(3);
    expect(
      new Set(orders.body.map((order: { buyer: string }) => order.buyer)).size,
    ).toBe(3);

    // A plain PostgreSQL client sees the same rows.
    const pgClient = new pg.Client({
      connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    });
    await pgClient.connect();
    try {
      const { rows } = await pgClient.query(
        'select count(*)::int as n from orders where coupon_id = $1',
        [couponId],
      );
      expect(rows).toEqual([{ n: 3 }]);
    } finally {
      await pgClient.end();
    }

    await client.http.get('/health').expect(200);
  });

  it('keeps the data on disk, and serves it from the standalone embedded-db-server script', async () => {
    // The hosting instance stops: the other one takes over, from the same data.
    const [first, second] = apps.splice(0, 2);
    expect([hosts(first), hosts(second)].toSorted()).toEqual([false, true]);
    const [host, client] = hosts(first) ? [first, second] : [second, first];
    await host.close();
    const deadline = Date.now() + 15_000;
    while (
      !hosts(client) ||
      (await client.http.get('/health')).status !== 200
    ) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const kept = await client.http.get('/api/coupons').expect(200);
    expect(kept.body).toEqual([
      expect.objectContaining({ stock: 3, sold: 3, remaining: 0 }),
    ]);
    await client.close();

    standalone = spawnTs(
      'apps/flash-sale/src/database/embedded-db-server.ts',
      [],
      {
        EMBEDDED_DB_PORT: String(port),
        EMBEDDED_DB_DIR: dataDir,
      },
    );
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "ready" line within 20 s:\n${output}`)),
        20_000,
      );
      const collect = (chunk: Buffer) => {
        output += chunk.toString();
        if (/^ready postgres:\/\//m.test(output)) {
          clearTimeout(timer);
          resolve();
        }
      };
      standalone!.stdout!.on('data', collect);
      standalone!.stderr!.on('data', collect);
      standalone!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited with ${code}:\n${output}`));
      });
    });

    const app = await boot();
    const list = await app.http.get('/api/coupons').expect(200);
    expect(list.body).toEqual([
      expect.objectContaining({ stock: 3, sold: 3, remaining: 0 }),
    ]);
    await app.close();
    apps.splice(apps.indexOf(app), 1);

    const exited = new Promise<number | null>((resolve) =>
      standalone!.once('exit', (code) => resolve(code)),
    );
    standalone.kill('SIGTERM');
    expect(await exited).toBe(0);
    standalone = undefined;
  });
});
