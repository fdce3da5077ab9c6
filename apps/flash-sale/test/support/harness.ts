import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import pg from 'pg';
import request from 'supertest';
import type { AppConfigOverrides } from '../../src/config/app-config.js';
import { createApp } from '../../src/main.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';

/**
 * Test helpers of the flash-sale app: a fresh PostgreSQL database per test
 * file on the local server, apps booted in-process with injected config.
 */

const CANDIDATE_ADMIN_URLS = [
  process.env.FLASH_SALE_TEST_PG_URL,
  'postgres://postgres@127.0.0.1:5432/test',
  'postgres://root@127.0.0.1:5432/test',
  'postgres://postgres@127.0.0.1:5432/postgres',
].filter((url): url is string => Boolean(url));

let adminUrl: Promise<string | undefined> | undefined;

/**
 * The URL of a local PostgreSQL the tests may create databases on (trust
 * auth), or undefined when none answers: FLASH_SALE_TEST_PG_URL, else
 * postgres://postgres@127.0.0.1:5432/test, else the same as role root.
 *
 * Outside CI the tests that need it are then skipped, with a warning. With
 * CI=true it rejects instead, failing every test file that needs it: a CI
 * machine without PostgreSQL must not pass by skipping them.
 */
export function findTestPostgres(): Promise<string | undefined> {
  adminUrl ??= (async () => {
    for (const url of CANDIDATE_ADMIN_URLS) {
      const client = new pg.Client({
        connectionString: url,
        connectionTimeoutMillis: 2_000,
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query('select 1');
        return url;
      } catch {
        // try the next one
      } finally {
        await client.end().catch(() => undefined);
      }
    }
    const missing =
      'no PostgreSQL answers at 127.0.0.1:5432 (tried roles postgres and root, ' +
      'database test; FLASH_SALE_TEST_PG_URL names another)';
    const howTo =
      'Install and start it with `apt-get install -y postgresql && ' +
      'pg_ctlcluster $(ls /etc/postgresql) main start`, with trust auth for ' +
      '127.0.0.1 and a database named test (.ci/run does this).';
    if (runningInCi())
      throw new Error(
        `flash-sale tests: CI=${process.env.CI} and ${missing}, so these tests fail ` +
          `rather than skip. ${howTo}`,
      );
    console.warn(
      `flash-sale tests: ${missing}, so the tests that need it are skipped. ${howTo}`,
    );
    return undefined;
  })();
  return adminUrl;
}

/** CI=true (or any value but empty, 0 and false), as CI systems set it. */
function runningInCi(): boolean {
  const ci = process.env.CI?.trim().toLowerCase();
  return ci !== undefined && ci !== '' && ci !== '0' && ci !== 'false';
}

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  /** A dedicated connection (release it when done), e.g. to hold a lock. */
  connect(): Promise<pg.PoolClient>;
  /** A query on the test database (for checks and sabotage). */
  query<T extends pg.QueryResultRow = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<T[]>;
  drop(): Promise<void>;
}

/** CREATE DATABASE flash_<random>; `drop()` removes it (forcing connections out). */
export async function createTestDatabase(admin: string): Promise<TestDatabase> {
  const name = `flash_${randomBytes(6).toString('hex')}`;
  const adminClient = new pg.Client({ connectionString: admin });
  await adminClient.connect();
  try {
    await adminClient.query(
      `create database ${adminClient.escapeIdentifier(name)}`,
    );
  } finally {
    await adminClient.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on('error', () => undefined);
  return {
    url: url.toString(),
    name,
    connect: () => pool.connect(),
    query: async (text, values) => (await pool.query(text, values)).rows,
    drop: async () => {
      await pool.end();
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(
          `drop database if exists ${client.escapeIdentifier(name)} with (force)`,
        );
      } finally {
        await client.end();
      }
    },
  };
}

export interface TestApp {
  readonly app: INestApplication;
  readonly http: ReturnType<typeof request>;
  close(): Promise<void>;
}

/**
 * Boots the app in-process (quiet unless FLASH_SALE_TEST_LOGS=1), configured
 * by `env` (as if it were the process environment) and then `config`.
 */
export async function startApp(
  config: AppConfigOverrides,
  env: NodeJS.ProcessEnv = {},
): Promise<TestApp> {
  const app = await createApp({
    config: { couponCacheTtl: 0, ...config },
    env,
    logger: process.env.FLASH_SALE_TEST_LOGS ? ['log', 'error', 'warn'] : false,
  });
  const server = app.getHttpServer();
  return {
    app,
    http: request(server),
    close: () => app.close(),
  };
}

/** A coupon body whose sale is open now. */
export function couponBody(
  fields: Partial<{
    name: string;
    price: number;
    stock: number;
    startAt: string;
    endAt: string;
  }> = {},
) {
  return { name: 'Flash coupon', price: 9.99, stock: 10, ...fields };
}

/**
 * The admin token of the apps the tests boot (ADMIN_TOKEN, read by the app
 * at each request; set here unless the environment sets one).
 */
export const TEST_ADMIN_TOKEN = (process.env.ADMIN_TOKEN ??=
  'test-admin-token-0123456789');

/** The header that lets a request through the admin routes. */
export const adminAuth = (): [string, string] => [
  'Authorization',
  `Bearer ${TEST_ADMIN_TOKEN}`,
];

/** Creates a coupon through the API (with the admin token) and returns its id. */
export async function createCoupon(
  http: TestApp['http'],
  fields: Parameters<typeof couponBody>[0] = {},
): Promise<number> {
  const response = await http
    .post('/api/coupons')
    .set(...adminAuth())
    .send(couponBody(fields))
    .expect(201);
  return (response.body as { id: number }).id;
}

/** POST /api/coupon/seckill/:id as `userId`. */
export function buy(http: TestApp['http'], couponId: number, userId: string) {
  return http.post(`/api/coupon/seckill/${couponId}`).set('userId', userId);
}

/**
 * The invariants after any run: orders in the database = initial stock -
 * remaining stock in Redis, at most one order per user and coupon.
 */
export async function checkInvariants(
  db: TestDatabase,
  remainingInRedis: number,
  couponId: number,
): Promise<{ orders: number; stock: number }> {
  const [coupon] = await db.query<{ stock: number }>(
    'select stock from coupons where id = $1',
    [couponId],
  );
  const [{ orders, buyers }] = await db.query<{
    orders: string;
    buyers: string;
  }>(
    'select count(*) as orders, count(distinct user_id) as buyers from orders where coupon_id = $1',
    [couponId],
  );
  expect(Number(orders)).toBe(coupon.stock - remainingInRedis);
  expect(Number(buyers)).toBe(Number(orders));
  return { orders: Number(orders), stock: coupon.stock };
}

export const sleep = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A private redis-server and a fresh test database, started side by side for one test file. */
export async function startSaleBackends(
  admin: string,
): Promise<{ redisServer: RedisServerHandle; db: TestDatabase }> {
  const [redisServer, db] = await Promise.all([
    startRedisServer(),
    createTestDatabase(admin),
  ]);
  return { redisServer, db };
}

/** The live handles of {@link useSaleBackends}, set once its `beforeAll` ran. */
export interface SaleBackends {
  redisServer: RedisServerHandle;
  db: TestDatabase;
}

/**
 * Starts a file's private Redis and test database before its tests and removes
 * them after. Call it first in a `describe`: hooks registered later run after
 * its start and before its teardown.
 */
export function useSaleBackends(admin: string): SaleBackends {
  const backends = {} as SaleBackends;
  beforeAll(async () => {
    Object.assign(backends, await startSaleBackends(admin));
  });
  afterAll(async () => {
    await backends.db?.drop();
    await backends.redisServer?.stop();
  });
  return backends;
}

/** What {@link useSaleApp} sets up for a test file; read inside tests. */
export interface SaleApp {
  readonly sale: SaleBackends;
  /** The app, on the file's Redis and database. */
  readonly app: TestApp;
  /** A plain client of the file's Redis, for looking at keys. */
  readonly redis: Redis;
}

/**
 * {@link useSaleBackends}, an app started on them with `config`, and a Redis
 * client; all closed after the file. Call it first in a `describe`.
 */
export function useSaleApp(
  admin: string,
  config: AppConfigOverrides = {},
): SaleApp {
  const sale = useSaleBackends(admin);
  let app: TestApp | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    redis = new Redis(sale.redisServer.url);
    redis.on('error', () => undefined);
    app = await startApp({
      redisUrl: sale.redisServer.url,
      databaseUrl: sale.db.url,
      ...config,
    });
  });
  afterAll(async () => {
    await app?.close();
    redis?.disconnect();
  });
  return {
    sale,
    get app() {
      return started(app);
    },
    get redis() {
      return started(redis);
    },
  };
}

function started<T>(value: T | undefined): T {
  if (value === undefined)
    throw new Error('useSaleApp: the app starts in beforeAll');
  return value;
}
