import { setTimeout as sleep } from 'node:timers/promises';
import { Logger, type LoggerService } from '@nestjs/common';
import pg from 'pg';
import {
  EMBEDDED_DB_HOST,
  embeddedDatabaseUrl,
  tryToHost,
  type EmbeddedDatabaseHost,
} from './embedded-db-host.js';

export { embeddedDatabaseUrl } from './embedded-db-host.js';

/**
 * The no-setup database: PGlite (PostgreSQL compiled to WebAssembly) with its
 * data in a directory, served over the PostgreSQL wire protocol on a fixed
 * loopback port, so that every instance on this machine uses the same one.
 *
 * The first instance that finds the port free binds it and hosts the
 * database; the others connect to it like to any PostgreSQL server. Holding
 * the port is what makes an instance the host: binding is atomic, so two
 * instances can never open the data directory at once (see
 * `embedded-db-host.ts`), and when the host exits the kernel frees the port.
 *
 * When the host exits, the others notice through their failing connections
 * ({@link EmbeddedDatabase.recover}): the port refuses connections, so each
 * tries to bind it; the one that wins opens the same data directory and
 * hosts, the others reconnect to it. A host that is frozen rather than gone
 * keeps the port bound: nobody takes over, which is what keeps its data safe.
 */

export interface EmbeddedDatabaseOptions {
  /** Loopback port shared by all instances. */
  readonly port: number;
  /** PGlite's data directory (created if missing). */
  readonly dataDir: string;
  /** Connections the host accepts, from all instances together. */
  readonly maxConnections: number;
  /** How long to wait for a host that is still starting, in ms. Default 60000. */
  readonly readyTimeout?: number;
  /** How long a takeover waits for the new host to answer, in ms. Default 10000. */
  readonly takeoverTimeout?: number;
  /** How long a new host waits for the previous host's process to exit, in ms. Default 3000. */
  readonly ownerExitTimeout?: number;
  readonly logger?: LoggerService;
}

/** How a {@link EmbeddedDatabase.recover} call ended. */
export type RecoveryOutcome =
  /** The host answers (the failure was not its loss), or this instance is the host. */
  | 'host-answers'
  /** The host was gone: this instance hosts the database now. */
  | 'took-over'
  /** The host was gone: another instance took over, and answers. */
  | 'other-took-over'
  /** The port is held but nothing answers in time (a frozen host): left alone. */
  | 'no-answer'
  /** The database is closed (this instance stops). */
  | 'closed';

export interface EmbeddedDatabase {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string;
  /** Whether this process hosts the database now (else it is a client of another instance). */
  readonly hosted: boolean;
  /**
   * To call when a connection to `url` failed (refused, reset, closed): if
   * the host is gone, becomes the host or waits for whoever did, within the
   * takeover timeout. Concurrent calls share one check. Rejects, saying what
   * to do, when this instance won the port but cannot open the data directory.
   */
  recover(failure: Error): Promise<RecoveryOutcome>;
  /** Stops hosting (closing every instance's connections); stops taking over. */
  close(): Promise<void>;
}

/** Connects to the shared embedded database, hosting it when nobody does yet. */
export async function openEmbeddedDatabase(
  options: EmbeddedDatabaseOptions,
): Promise<EmbeddedDatabase> {
  const logger = options.logger ?? new Logger('EmbeddedDatabase');
  const url = embeddedDatabaseUrl(options.port);
  const readyTimeout = options.readyTimeout ?? 60_000;
  const deadline = Date.now() + readyTimeout;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const host = await tryToHost(hostOptions(options), logger);
    if (host) return new SharedEmbeddedDatabase(options, logger, host);
    // Someone holds the port: wait until it answers as PostgreSQL.
    while (Date.now() < deadline) {
      lastError = await pingPostgres(url, 2_000);
      if (lastError === undefined) {
        logger.log(
          `Using the embedded database hosted by another instance at ${url}`,
        );
        return new SharedEmbeddedDatabase(options, logger, undefined);
      }
      // The host went away in between: try to become the host.
      if (isRefused(lastError)) break;
      await sleep(200);
    }
  }
  throw new Error(
    `Port ${options.port} on ${EMBEDDED_DB_HOST} is in use, but no PostgreSQL answered there within ` +
      `${readyTimeout} ms (${describe(lastError)}). ` +
      'Set EMBEDDED_DB_PORT to a free port, or DATABASE_URL to a PostgreSQL server.',
    { cause: lastError },
  );
}

class SharedEmbeddedDatabase implements EmbeddedDatabase {
  readonly url: string;
  private recovering: Promise<RecoveryOutcome> | undefined;
  private quietUntil = 0;
  private closed = false;

  constructor(
    private readonly options: EmbeddedDatabaseOptions,
    private readonly logger: LoggerService,
    private host: EmbeddedDatabaseHost | undefined,
  ) {
    this.url = embeddedDatabaseUrl(options.port);
  }

  get hosted(): boolean {
    return this.host !== undefined;
  }

  recover(failure: Error): Promise<RecoveryOutcome> {
    if (this.closed) return Promise.resolve('closed');
    if (this.host) return Promise.resolve('host-answers');
    // A burst of failures while the host answers (a busy pool) checks once.
    if (Date.now() < this.quietUntil) return Promise.resolve('host-answers');
    this.recovering ??= this.takeOverIfHostIsGone(failure).then(
      (outcome) => {
        this.recovering = undefined;
        if (outcome === 'host-answers') this.quietUntil = Date.now() + 1_000;
        return outcome;
      },
      (error: unknown) => {
        this.recovering = undefined;
        throw error;
      },
    );
    return this.recovering;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.recovering?.catch(() => undefined);
    const host = this.host;
    this.host = undefined;
    await host?.close();
  }

  private async takeOverIfHostIsGone(failure: Error): Promise<RecoveryOutcome> {
    const startedAt = Date.now();
    const deadline = startedAt + (this.options.takeoverTimeout ?? 10_000);
    let hostWasGone = false;
    let saidSilent = false;
    let lastError: Error | undefined;
    while (!this.closed) {
      lastError = await pingPostgres(this.url, 1_000);
      if (lastError === undefined) {
        if (!hostWasGone) return 'host-answers';
        this.logger.log(
          `Another instance took over the embedded database at ${this.url} ` +
            `${Date.now() - startedAt} ms after its host was lost; reconnected`,
        );
        return 'other-took-over';
      }
      if (isRefused(lastError)) {
        if (!hostWasGone) {
          this.logger.warn?.(
            `The instance hosting the embedded database at ${this.url} is gone ` +
              `(${describe(failure)}): trying to take over`,
          );
        }
        hostWasGone = true;
        const host = await tryToHost(hostOptions(this.options), this.logger);
        if (host) {
          if (this.closed) {
            await host.close();
            return 'closed';
          }
          this.host = host;
          this.logger.log(
            `Took over the embedded database ${Date.now() - startedAt} ms after its host ` +
              `was lost: this instance hosts it now (data in ${this.options.dataDir})`,
          );
          return 'took-over';
        }
        // Another instance won the port: wait until it answers.
      }
      if (!hostWasGone && !saidSilent) {
        saidSilent = true;
        this.logger.warn?.(
          `The embedded database at ${this.url} holds its port but does not answer ` +
            `(${describe(lastError)}): its host is starting, frozen or overloaded. ` +
            'Not taking over while it holds the port; waiting for it.',
        );
      }
      if (Date.now() >= deadline) break;
      await sleep(200);
    }
    if (this.closed) return 'closed';
    this.logger.warn?.(
      `The embedded database at ${this.url} still did not answer after ` +
        `${Date.now() - startedAt} ms (${describe(lastError)}); checking again at the next ` +
        'failed connection. If this lasts, restart or stop the process that holds port ' +
        `${this.options.port}.`,
    );
    return 'no-answer';
  }
}

function hostOptions(options: EmbeddedDatabaseOptions) {
  return {
    port: options.port,
    dataDir: options.dataDir,
    maxConnections: options.maxConnections,
    ownerExitTimeout: options.ownerExitTimeout ?? 3_000,
  };
}

function isRefused(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === 'ECONNREFUSED';
}

/** Runs `select 1` on a fresh connection; resolves the error, or undefined when it worked. */
export async function pingPostgres(
  url: string,
  timeoutMs: number,
): Promise<Error | undefined> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  } finally {
    await client.end().catch(() => undefined);
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}
