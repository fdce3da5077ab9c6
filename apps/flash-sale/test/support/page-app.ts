import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { getFreePort } from '../../../../test/support/ports.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../../test/support/redis-server.js';
import type { AppConfigOverrides } from '../../src/config/app-config.js';
import {
  createTestDatabase,
  startApp,
  type TestApp,
  type TestDatabase,
} from './harness.js';

/** What {@link usePageApp} sets up for a test file; read inside tests. */
export interface PageApp {
  readonly app: TestApp;
  /** `http://127.0.0.1:<port>` of the listening app. */
  readonly baseUrl: string;
  readonly redisServer: RedisServerHandle;
  /** The database part of the app's config, for another instance on it. */
  readonly database: AppConfigOverrides;
}

/**
 * A private Redis, a database (a fresh PostgreSQL one when `postgres` is
 * given, else the app's embedded one on a private port and directory) and
 * an app listening on a free port; all removed after the file. The periodic
 * stock check is off: it takes coupon locks, and the page's tests check that
 * watching never does.
 */
export function usePageApp(postgres: string | undefined): PageApp {
  const state = {} as {
    app: TestApp;
    baseUrl: string;
    redisServer: RedisServerHandle;
    database: AppConfigOverrides;
    db?: TestDatabase;
    embeddedDir?: string;
  };
  beforeAll(async () => {
    state.redisServer = await startRedisServer();
    if (postgres) {
      state.db = await createTestDatabase(postgres);
      state.database = { databaseUrl: state.db.url };
    } else {
      state.embeddedDir = await mkdtemp(
        path.join(os.tmpdir(), 'flash-sale-db-'),
      );
      state.database = {
        embeddedDb: { port: await getFreePort(), dataDir: state.embeddedDir },
      };
    }
    state.app = await startApp({
      redisUrl: state.redisServer.url,
      ...state.database,
      stockRepairInterval: 0,
    });
    await state.app.app.listen(0, '127.0.0.1');
    const { port } = state.app.app.getHttpServer().address() as AddressInfo;
    state.baseUrl = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await state.app?.close();
    await state.db?.drop();
    await state.redisServer?.stop();
    if (state.embeddedDir)
      await rm(state.embeddedDir, { recursive: true, force: true });
  });
  return state;
}
