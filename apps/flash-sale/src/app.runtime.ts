import type { LoggerService } from '@nestjs/common';
import type { AppConfig } from './config/app-config.js';
import { createDatabase } from './database/database.js';
import type { Db, DbPool } from './database/database.types.js';
import {
  openEmbeddedDatabase,
  type EmbeddedDatabase,
} from './database/embedded-db.js';
import { migrateToLatest } from './database/migrator.js';
import { redactUrl } from './common/redact-url.js';
import type { RedisClient } from './redis/redis-client.js';
import { openRedis } from './redis/resolve-redis.js';

/** Injection token of the {@link AppRuntime}. */
export const APP_RUNTIME = Symbol('APP_RUNTIME');

/**
 * What the app runs on, set up before Nest starts and closed after it stops:
 * the Redis client, the migrated database, and the local fallbacks (a
 * redis-server child, the embedded database) when this instance runs them.
 */
export interface AppRuntime {
  readonly config: AppConfig;
  /** A Redis Cluster client with REDIS_CLUSTER_NODES, else one server's. */
  readonly redis: RedisClient;
  readonly db: Db;
  /** The pool behind `db`, for statements that need to know their connection (the sale's). */
  readonly pool: DbPool;
  /** Where the database is, without password. */
  readonly databaseLabel: string;
  /**
   * Whether this instance hosts the embedded database now (others connect
   * to it); it may become the host later, when the host exits.
   */
  readonly hostsEmbeddedDatabase: boolean;
  /** Closes everything, in reverse order of opening; safe to call twice. */
  close(): Promise<void>;
}

/**
 * Applies pending migrations on a connection of its own with generous
 * timeouts: an instance may have to wait for another one's migration.
 */
async function migrate(url: string, label: string): Promise<string[]> {
  const { db } = createDatabase({
    url,
    poolSize: 1,
    timeout: 60_000,
    label,
  });
  try {
    return await migrateToLatest(db);
  } catch (error) {
    throw new Error(
      `Cannot prepare the database (${label}): ${(error as Error).message}`,
      { cause: error },
    );
  } finally {
    await db.destroy();
  }
}

/**
 * What an instance does when the embedded database's host exited and this
 * instance won the port but cannot open the data directory: it says why and
 * what to do, and exits (code 1) rather than answer 503 forever; any other
 * instance may still take over, or a restart reports the same at startup.
 */
function exitOnUnrecoverableDatabase(
  logger: LoggerService,
  error: Error,
): void {
  logger.error(
    `Cannot take over the embedded database, exiting: ${error.message}`,
  );
  process.exit(1);
}

export async function openRuntime(
  config: AppConfig,
  logger: LoggerService,
): Promise<AppRuntime> {
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const close of closers.splice(0).toReversed()) {
      await close().catch((error: unknown) =>
        logger.warn?.(`While shutting down: ${(error as Error).message}`),
      );
    }
  };
  try {
    const opened = await openRedis(config, logger);
    closers.push(() => opened.close());
    const redis = opened.client;

    let url = config.databaseUrl;
    let label = url ? redactUrl(url) : '';
    let embedded: EmbeddedDatabase | undefined;
    if (url === undefined) {
      const database = await openEmbeddedDatabase({
        ...config.embeddedDb,
        logger,
      });
      embedded = database;
      closers.push(() => database.close());
      url = database.url;
      label = `embedded PGlite at ${url}`;
    }
    const { db, pool } = createDatabase({
      url,
      poolSize: config.dbPoolSize ?? (config.databaseUrl ? 10 : 4),
      timeout: config.backendTimeout,
      label,
      // A failed connection to the embedded database may mean its host
      // exited: take over, or reconnect to the instance that did.
      onConnectionLost:
        embedded &&
        ((error) =>
          void embedded
            .recover(error)
            .catch((failure: unknown) =>
              exitOnUnrecoverableDatabase(logger, failure as Error),
            )),
    });
    closers.push(() => db.destroy());
    const applied = await migrate(url, label);
    if (applied.length > 0) {
      logger.log(`Applied database migrations: ${applied.join(', ')}`);
    }

    let closed: Promise<void> | undefined;
    return {
      config,
      redis,
      db,
      pool,
      databaseLabel: label,
      get hostsEmbeddedDatabase() {
        return embedded?.hosted ?? false;
      },
      close: () => (closed ??= closeAll()),
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}
