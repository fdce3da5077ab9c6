import type { Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrations } from './migrations/index.js';

/**
 * Brings the schema up to date. Kysely's migrator holds a PostgreSQL advisory
 * lock and runs the pending migrations in one transaction, so instances that
 * start together do not clash: the others wait, then find nothing to do.
 * (On the embedded database the socket server additionally runs one
 * transaction at a time.)
 *
 * @returns the names of the migrations this call applied
 */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const migrator = new Migrator({
    db: db.withoutPlugins(),
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
  return (results ?? [])
    .filter((result) => result.status === 'Success')
    .map((result) => result.migrationName);
}
