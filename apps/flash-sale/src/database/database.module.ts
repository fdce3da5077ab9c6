import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { Db, DbPool } from './database.types.js';

/** Injection token of the app's Kysely instance. */
export const DATABASE = Symbol('DATABASE');
/** Injection token of the `pg` pool behind it. */
export const DATABASE_POOL = Symbol('DATABASE_POOL');

/**
 * Makes the app's Kysely instance injectable as `DATABASE`, its pool as
 * `DATABASE_POOL`. It is created,
 * migrated and closed by the app runtime, outside the module.
 */
@Global()
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class DatabaseModule {
  static forDatabase(db: Db, pool: DbPool): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        { provide: DATABASE, useValue: db },
        { provide: DATABASE_POOL, useValue: pool },
      ],
      exports: [DATABASE, DATABASE_POOL],
    };
  }
}
