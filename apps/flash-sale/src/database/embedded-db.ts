import { mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger, type LoggerService } from '@nestjs/common';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import pg from 'pg';

/**
 * The no-setup database: PGlite (PostgreSQL compiled to WebAssembly) with its
 * data in a directory, served over the PostgreSQL wire protocol on a fixed
 * loopback port, so that every instance on this machine uses the same one.
 *
 * The first instance that finds the port free binds it and hosts the
 * database; the others connect to it like to any PostgreSQL server. Holding
 * the port is what makes an instance the host: binding is atomic, so two
 * instances can never open the data directory at once, and when the host
 * exits the kernel frees the port for the next one (no lock file to go stale).
 *
 * The host's TCP port forwards each connection to a `PGLiteSocketServer` on a
 * private Unix socket, which multiplexes them onto the single PGlite backend
 * (one query at a time; a client's open transaction keeps the others waiting).
 * Connections that arrive while PGlite is still starting wait for it.
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
  readonly logger?: LoggerService;
}

export interface EmbeddedDatabase {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string;
  /** Whether this process hosts the database (else it is a client of another instance). */
  readonly hosted: boolean;
  /** Stops hosting (closing every instance's connections); a no-op for clients. */
  close(): Promise<void>;
}

const HOST = '127.0.0.1';

export function embeddedDatabaseUrl(port: number): string {
  return `postgres://postgres@${HOST}:${port}/postgres`;
}

/** Connects to the shared embedded database, hosting it when nobody does yet. */
export async function openEmbeddedDatabase(
  options: EmbeddedDatabaseOptions,
): Promise<EmbeddedDatabase> {
  const logger = options.logger ?? new Logger('EmbeddedDatabase');
  const url = embeddedDatabaseUrl(options.port);
  const deadline = Date.now() + (options.readyTimeout ?? 60_000);
  let lastError: unknown;
  while (Date.now() < deadline) {
    const hosted = await tryToHost(options, logger);
    if (hosted) return hosted;
    // Someone holds the port: wait until it answers as PostgreSQL.
    while (Date.now() < deadline) {
      lastError = await pingPostgres(url, 2_000);
      if (lastError === undefined) {
        logger.log(
          `Using the embedded database hosted by another instance at ${url}`,
        );
        return { url, hosted: false, close: () => Promise.resolve() };
      }
      // The host went away in between: try to become the host.
      if ((lastError as { code?: unknown }).code === 'ECONNREFUSED') break;
      await sleep(200);
    }
  }
  throw new Error(
    `Port ${options.port} on ${HOST} is in use, but no PostgreSQL answered there within ` +
      `${options.readyTimeout ?? 60_000} ms (${describe(lastError)}). ` +
      'Set EMBEDDED_DB_PORT to a free port, or DATABASE_URL to a PostgreSQL server.',
    { cause: lastError },
  );
}

/** Binds the port and starts PGlite behind it, or returns null when the port is taken. */
async function tryToHost(
  options: EmbeddedDatabaseOptions,
  logger: LoggerService,
): Promise<EmbeddedDatabase | null> {
  const server = net.createServer({ pauseOnConnect: true });
  try {
    await listen(server, options.port);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'EADDRINUSE') return null;
    throw error;
  }
  logger.log(
    `No database on ${HOST}:${options.port}: this instance hosts the embedded ` +
      `PGlite database (data in ${options.dataDir}) for every instance on this machine`,
  );

  // Named after the port we hold, so only we can be using it: a file left
  // behind by a host that was killed is simply replaced.
  const socketPath = path.join(
    os.tmpdir(),
    `flash-sale-db-${options.port}.sock`,
  );
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  let pglite: PGlite | undefined;
  let socketServer: PGLiteSocketServer | undefined;

  const startedAt = Date.now();
  const ready = (async () => {
    await rm(socketPath, { force: true });
    await mkdir(options.dataDir, { recursive: true });
    pglite = await PGlite.create(options.dataDir);
    socketServer = new PGLiteSocketServer({
      db: pglite,
      path: socketPath,
      maxConnections: options.maxConnections,
    });
    await socketServer.start();
  })();
  ready.catch(() => undefined); // handled below and per connection

  server.on('connection', (client: net.Socket) => {
    track(client);
    ready.then(
      () => {
        if (client.destroyed) return;
        const upstream = net.connect(socketPath);
        track(upstream);
        client.once('close', () => upstream.destroy());
        upstream.once('close', () => client.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      },
      () => client.destroy(),
    );
  });

  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    const stopped = new Promise<void>((resolve) =>
      server.close(() => resolve()),
    );
    for (const socket of sockets) socket.destroy();
    await stopped;
    await socketServer?.stop().catch(() => undefined);
    await pglite?.close().catch(() => undefined);
    await rm(socketPath, { force: true }).catch(() => undefined);
  };

  try {
    await ready;
  } catch (error) {
    await close();
    throw new Error(
      `Could not start the embedded database in ${options.dataDir}: ${describe(error)}`,
      { cause: error },
    );
  }
  logger.log(
    `Embedded database ready at ${embeddedDatabaseUrl(options.port)} after ${Date.now() - startedAt} ms`,
  );
  return { url: embeddedDatabaseUrl(options.port), hosted: true, close };
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen({ port, host: HOST, exclusive: true }, () => {
      server.off('error', onError);
      resolve();
    });
  });
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
