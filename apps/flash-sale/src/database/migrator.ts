import { sql, type Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrations } from './migrations/index.js';

/** The advisory lock the instances' migrations take turns on (any fixed number). */
const migrationLockId = 7_310_524_001;

/**
 * Brings the schema up to date, in one transaction that first takes a
 * PostgreSQL advisory lock, so instances that start together take turns: the
 * later ones find nothing to do.
 *
 * Everything runs in that transaction, the migrator's checks for its own
 * tables included. The embedded database's socket server multiplexes every
 * connection onto one PGlite session and keeps the others out only while a
 * transaction is open; outside one, the parse/bind steps of two instances'
 * queries can interleave there, and a startup failed with "unnamed prepared
 * statement does not exist" (a known pglite-socket defect). A migration that
 * fails rolls the whole transaction back.
 *
 * @returns the names of the migrations this call applied
 */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const applied = await db
    .withoutPlugins()
    .transaction()
    .execute(async (trx) => {
      // First, before the migrator checks for its tables: two transactions
      // that both create them would otherwise collide, and a failed statement
      // leaves the transaction unusable for the migrator's check after it.
      await sql`select pg_advisory_xact_lock(${migrationLockId})`.execute(trx);
      const migrator = new Migrator({
        db: trx,
        provider: { getMigrations: () => Promise.resolve(migrations) },
      });
      const { error, results } = await migrator.migrateToLatest();
      if (error !== undefined) {
        const failed = results?.find((result) => result.status === 'Error');
        throw new Error(
          `Database migration ${failed ? `"${failed.migrationName}" ` : ''}failed: ${
            error instanceof Error ? error.message : String(error)
          }`,
          { cause: error },
        );
      }
      return results;
    });
  return (applied ?? [])
    .filter((result) => result.status === 'Success')
    .map((result) => result.migrationName);
}
