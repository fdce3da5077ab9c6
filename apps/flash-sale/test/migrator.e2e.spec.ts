import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../src/database/migrator.js';
import { createTestDatabase, findTestPostgres } from './support/harness.js';

const postgres = await findTestPostgres();

describe.skipIf(!postgres)('the migrator', () => {
  it('runs its checks and migrations in one transaction, which the embedded database keeps to one connection', async () => {
    const database = await createTestDatabase(postgres!);
    const sent: string[] = [];
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (
        ...args: unknown[]
      ) => unknown;
      (client as { query: unknown }).query = (...args: unknown[]) => {
        const [text] = args;
        sent.push(
          (typeof text === 'string' ? text : (text as { text: string }).text)
            .trim()
            .toLowerCase(),
        );
        return query(...args);
      };
    });
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    try {
      const applied = await migrateToLatest(db);
      expect(applied.length).toBeGreaterThan(0);
      // The embedded database's socket server keeps other connections' queries
      // out only while a transaction is open: queries outside one, from
      // instances starting together, could interleave there and fail with
      // "unnamed prepared statement does not exist".
      expect(sent[0]).toBe('begin');
      expect(sent.at(-1)).toBe('commit');
      expect(sent.filter((text) => text === 'begin')).toHaveLength(1);

      sent.length = 0;
      expect(await migrateToLatest(db)).toEqual([]);
      expect([sent[0], sent.at(-1)]).toEqual(['begin', 'commit']);
      expect(
        await database.query('select count(*)::int as n from coupons'),
      ).toEqual([{ n: 0 }]);
    } finally {
      await db.destroy();
      await database.drop();
    }
  });
});
