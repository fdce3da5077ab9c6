/**
 * Hosts the embedded PGlite database as a process of its own, so that app
 * instances (and a load tool) can come and go while the database stays up.
 *
 *   node --import @swc-node/register/esm-register apps/flash-sale/src/database/embedded-db-server.ts
 *   node dist/apps/flash-sale/database/embedded-db-server.js        (after npm run build:app)
 *
 * Reads EMBEDDED_DB_PORT (default 54329), EMBEDDED_DB_DIR (default
 * .data/flash-sale-db) and EMBEDDED_DB_MAX_CONNECTIONS (default 100). Prints
 * `ready postgres://postgres@127.0.0.1:<port>/postgres` once it accepts
 * connections; stops on SIGINT or SIGTERM. Exits with code 2 when another
 * process already hosts the database on that port.
 */
import { Logger } from '@nestjs/common';
import { loadConfig } from '../config/app-config.js';
import { openEmbeddedDatabase } from './embedded-db.js';
import { migrateToLatest } from './migrator.js';
import { createDatabase } from './database.js';

const logger = new Logger('EmbeddedDatabase');
const config = loadConfig();
const database = await openEmbeddedDatabase({ ...config.embeddedDb, logger });
if (!database.hosted) {
  logger.error(
    `Another process already hosts the database at ${database.url}; not starting a second one`,
  );
  process.exit(2);
}

// Apply the schema right away, so tools can use the database before any app starts.
const { db } = createDatabase({
  url: database.url,
  poolSize: 1,
  timeout: 10_000,
  label: 'embedded database',
});
try {
  await migrateToLatest(db);
} finally {
  await db.destroy();
}

let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  logger.log(`${signal}: stopping the embedded database`);
  await database.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));

console.log(`ready ${database.url}`);
