import { Logger } from '@nestjs/common';
import { CamelCasePlugin, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './database.types.js';

export interface DatabaseConnectionOptions {
  readonly url: string;
  readonly poolSize: number;
  /**
   * Longest wait for a connection, in ms. Statements get twice that: the
   * server cancels longer ones (so a slow insert fails for sure rather than
   * commits later), and the client gives up a second after that.
   */
  readonly timeout: number;
  /** Shown in logs instead of the URL, which may carry a password. */
  readonly label: string;
}

const { builtins } = pg.types;

/**
 * bigint (ids, counts) and numeric (prices) arrive as strings from `pg`;
 * both stay far below 2^53 here, so they are parsed to numbers.
 */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === builtins.INT8) return (value: string) => Number(value);
      if (oid === builtins.NUMERIC) return (value: string) => Number(value);
    }
    return pg.types.getTypeParser(oid, format as 'text');
  }) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * A Kysely instance over a `pg` pool, the same for PostgreSQL and for the
 * embedded PGlite (reached through its socket server). Calls are bounded in
 * time, so a database that went away yields an error (503), never a hang.
 */
export function createDatabase(options: DatabaseConnectionOptions): {
  db: Kysely<Database>;
  pool: pg.Pool;
} {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize,
    connectionTimeoutMillis: options.timeout,
    statement_timeout: options.timeout * 2,
    query_timeout: options.timeout * 2 + 1_000,
    idleTimeoutMillis: 30_000,
    types,
  });
  const logger = new Logger('Database');
  let lastError = '';
  // An idle client whose server went away emits 'error' on the pool; without
  // a listener that would crash the process.
  pool.on('error', (error) => {
    if (error.message !== lastError) {
      logger.warn(`${options.label}: ${error.message}`);
      lastError = error.message;
    }
  });
  pool.on('connect', () => {
    lastError = '';
  });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    plugins: [new CamelCasePlugin()],
  });
  return { db, pool };
}
