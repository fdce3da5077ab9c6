import { mkdir, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { LoggerService } from '@nestjs/common';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import {
  DataDirectoryLockedError,
  lockDataDirectory,
} from './embedded-db-lock.js';

/**
 * Hosting the embedded database: holding the loopback port, owning the data
 * directory, running PGlite behind a `PGLiteSocketServer`.
 *
 * The port is bound first and released last: whoever holds it is the only
 * process that may open the data directory, from before PGlite opens until
 * after it has closed. The host's TCP port forwards each connection to the
 * socket server on a private Unix socket, which multiplexes them onto the
 * single PGlite backend. Connections that arrive while PGlite is starting
 * wait for it; those that arrive while it stops are closed.
 */

export const EMBEDDED_DB_HOST = '127.0.0.1';

export interface HostOptions {
  readonly port: number;
  readonly dataDir: string;
  readonly maxConnections: number;
  /** How long to wait for the data directory's previous owner to exit, in ms. */
  readonly ownerExitTimeout: number;
}

export interface EmbeddedDatabaseHost {
  /** Stops serving, closes PGlite, then frees the port. Safe to call twice. */
  close(): Promise<void>;
}

export function embeddedDatabaseUrl(port: number): string {
  return `postgres://postgres@${EMBEDDED_DB_HOST}:${port}/postgres`;
}

/**
 * Binds the port and starts PGlite behind it; null when the port is taken
 * (another process hosts). Rejects, with the port free again, when the data
 * directory cannot be opened, saying what to do about it.
 */
export async function tryToHost(
  options: HostOptions,
  logger: LoggerService,
): Promise<EmbeddedDatabaseHost | null> {
  const server = net.createServer({ pauseOnConnect: true });
  try {
    await listen(server, options.port);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'EADDRINUSE') return null;
    throw error;
  }
  logger.log(
    `No database on ${EMBEDDED_DB_HOST}:${options.port}: this instance hosts the embedded ` +
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
  let unlockDataDir: (() => Promise<void>) | undefined;
  let closing = false;

  const startedAt = Date.now();
  const ready = (async () => {
    await rm(socketPath, { force: true });
    await mkdir(options.dataDir, { recursive: true });
    unlockDataDir = await lockDataDirectory(
      options.dataDir,
      options.ownerExitTimeout,
    );
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
    if (closing) return void client.destroy();
    ready.then(
      () => {
        if (client.destroyed || closing) return void client.destroy();
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

  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      closing = true;
      await ready.catch(() => undefined);
      for (const socket of sockets) socket.destroy();
      await socketServer?.stop().catch(() => undefined);
      await pglite?.close().catch(() => undefined);
      await unlockDataDir?.().catch(() => undefined);
      await rm(socketPath, { force: true }).catch(() => undefined);
      // Only now may another process open the data directory.
      await new Promise<void>((resolve) => server.close(() => resolve()));
    })());

  try {
    await ready;
  } catch (error) {
    await close();
    throw new Error(cannotOpenMessage(options.dataDir, error), {
      cause: error,
    });
  }
  logger.log(
    `Embedded database ready at ${embeddedDatabaseUrl(options.port)} after ${Date.now() - startedAt} ms`,
  );
  return { close };
}

function cannotOpenMessage(dataDir: string, error: unknown): string {
  if (error instanceof DataDirectoryLockedError) return error.message;
  const reason =
    error instanceof Error ? error.message || error.name : String(error);
  return (
    `Could not open the embedded database in ${dataDir}: ${reason}. ` +
    'If another program uses that directory, stop it; if it is damaged, move it ' +
    'away (a new, empty database is created in its place) or set EMBEDDED_DB_DIR ' +
    'to another directory; or set DATABASE_URL to a PostgreSQL server.'
  );
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen({ port, host: EMBEDDED_DB_HOST, exclusive: true }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
