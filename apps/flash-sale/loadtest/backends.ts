import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { getFreePort } from '../../../test/support/ports.js';
import { startRedisServer } from '../../../test/support/redis-server.js';
import { redactUrl } from '../src/common/redact-url.js';
import { createDatabase } from '../src/database/database.js';
import { pingPostgres } from '../src/database/embedded-db.js';
import { migrateToLatest } from '../src/database/migrator.js';
import { pingRedis } from '../src/redis/redis-client.js';
import { nodeArgs, spawnGuarded } from './child-process.js';

/** A Redis or database the instances share, and how to let go of it. */
export interface Backend {
  readonly url: string;
  /** For the report, without password. */
  readonly label: string;
  close(): Promise<void>;
}

/** `url` when given (it must answer), else a private redis-server on a free port. */
export async function openRedis(url: string | undefined): Promise<Backend> {
  if (url !== undefined) {
    const error = await pingRedis(url, 2_000);
    if (error) {
      throw new Error(
        `Redis at ${redactUrl(url)} does not answer: ${error.message}`,
      );
    }
    return { url, label: redactUrl(url), close: () => Promise.resolve() };
  }
  const server = await startRedisServer();
  return {
    url: server.url,
    label: `private redis-server at ${server.url}`,
    close: () => server.stop(),
  };
}

export interface DatabaseBackend extends Backend {
  /** Whether it is the embedded PGlite server this tool started. */
  readonly embedded: boolean;
}

const EMBEDDED_SOURCE = 'apps/flash-sale/src/database/embedded-db-server.ts';
const EMBEDDED_BUILD = 'dist/apps/flash-sale/database/embedded-db-server.js';

/**
 * `url` when given (PostgreSQL), else the embedded PGlite server as a process
 * of its own, with its data in a temporary directory, so that every instance
 * uses one database and an instance killed mid-run takes nothing down with
 * it. The schema is migrated before any instance starts.
 */
export async function openDatabase(
  url: string | undefined,
  options: { fromBuild: boolean; maxConnections: number },
): Promise<DatabaseBackend> {
  const backend =
    url === undefined
      ? await startEmbedded(options)
      : {
          url,
          label: redactUrl(url),
          embedded: false,
          close: () => Promise.resolve(),
        };
  try {
    const error = await pingPostgres(backend.url, 5_000);
    if (error)
      throw new Error(`${backend.label} does not answer: ${error.message}`);
    const { db } = createDatabase({
      url: backend.url,
      poolSize: 1,
      timeout: 30_000,
      label: backend.label,
    });
    try {
      await migrateToLatest(db);
    } finally {
      await db.destroy();
    }
    return backend;
  } catch (error) {
    await backend.close();
    throw error;
  }
}

async function startEmbedded(options: {
  fromBuild: boolean;
  maxConnections: number;
}): Promise<DatabaseBackend> {
  const [dir, port] = await Promise.all([
    mkdtemp(path.join(os.tmpdir(), 'flash-sale-loadtest-db-')),
    getFreePort(),
  ]);
  let ready: ((url: string) => void) | undefined;
  const readyLine = new Promise<string>((resolve) => (ready = resolve));
  const proc = spawnGuarded(
    nodeArgs(options.fromBuild ? EMBEDDED_BUILD : EMBEDDED_SOURCE),
    {
      ...process.env,
      EMBEDDED_DB_PORT: String(port),
      EMBEDDED_DB_DIR: dir,
      EMBEDDED_DB_MAX_CONNECTIONS: String(options.maxConnections),
      NO_COLOR: '1',
    },
    (line) => {
      const match = /^ready (postgres:\/\/\S+)/.exec(line);
      if (match) ready?.(match[1]);
    },
  );
  const close = async () => {
    await proc.stop('SIGTERM', 5_000);
    await rm(dir, { recursive: true, force: true });
  };
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    readyLine,
    proc.exited.then(() => 'exited' as const),
    new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), 60_000);
    }),
  ]);
  clearTimeout(timer);
  if (outcome === 'exited' || outcome === 'late') {
    const tail = proc.tail();
    await close();
    throw new Error(
      `The embedded database server ${outcome === 'late' ? 'did not get ready within 60 s' : 'exited'}:\n${tail}`,
    );
  }
  return {
    url: outcome,
    label: `embedded PGlite (own process, port ${port})`,
    embedded: true,
    close,
  };
}
