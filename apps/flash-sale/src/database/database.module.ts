import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { Db } from './database.types.js';

/** Injection token of the app's Kysely instance. */
export const DATABASE = Symbol('DATABASE');

/**
 * Makes the app's Kysely instance injectable as `DATABASE`. It is created,
 * migrated and closed by the app runtime, outside the module.
 */
@Global()
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class DatabaseModule {
  static forDatabase(db: Db): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [{ provide: DATABASE, useValue: db }],
      exports: [DATABASE],
    };
  }
}
