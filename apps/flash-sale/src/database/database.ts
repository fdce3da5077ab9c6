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
  /**
   * Called when the server cannot be reached any more: a connection was
   * refused, reset or closed under an idle client. The embedded database
   * uses it to take over from a host that exited.
   */
  readonly onConnectionLost?: (error: Error) => void;
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
    options.onConnectionLost?.(error);
    if (error.message !== lastError) {
      logger.warn(`${options.label}: ${error.message}`);
      lastError = error.message;
    }
  });
  pool.on('connect', (client) => {
    lastError = '';
    // A client checked out of the pool (a transaction between two of its
    // queries) whose server goes away emits 'error' on itself, not on the
    // pool: the query in flight, or the next one, fails on its own.
    client.on('error', (error) => options.onConnectionLost?.(error));
  });
  if (options.onConnectionLost) {
    reportFailedConnects(pool, options.onConnectionLost);
  }
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    plugins: [new CamelCasePlugin()],
  });
  return { db, pool };
}

/**
 * Errors that say the server is unreachable, went away or does not answer a
 * new connection in time (not a failed statement).
 */
export function isConnectionFailure(error: unknown): boolean {
  const { code, message } = (error ?? {}) as {
    code?: unknown;
    message?: unknown;
  };
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE')
    return true;
  return (
    typeof message === 'string' &&
    /Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect/i.test(
      message,
    )
  );
}

type ConnectCallback = (
  error: Error | undefined,
  client: pg.PoolClient | undefined,
  done: (release?: unknown) => void,
) => void;

/** Calls `report` with the connection failures of `pool.connect()`, in both its forms. */
function reportFailedConnects(
  pool: pg.Pool,
  report: (error: Error) => void,
): void {
  const connect = pool.connect.bind(pool) as (
    callback?: ConnectCallback,
  ) => Promise<pg.PoolClient> | undefined;
  const check = (error: unknown) => {
    if (isConnectionFailure(error)) report(error as Error);
  };
  pool.connect = ((callback?: ConnectCallback) => {
    if (callback) {
      return connect((error, client, done) => {
        if (error) check(error);
        callback(error, client, done);
      });
    }
    return connect()!.catch((error: unknown) => {
      check(error);
      throw error;
    });
  }) as typeof pool.connect;
}
