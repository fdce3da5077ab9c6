import { Global, Module, type DynamicModule } from '@nestjs/common';
import { REDIS_CLIENT, type RedisClient } from './redis-client.js';

/**
 * Makes the app's Redis client injectable as `REDIS_CLIENT`. The client is
 * created (and closed) by the app runtime, outside the module, so that a
 * failed startup never leaks a connection.
 */
@Global()
@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class RedisModule {
  static forClient(client: RedisClient): DynamicModule {
    return {
      module: RedisModule,
      providers: [{ provide: REDIS_CLIENT, useValue: client }],
      exports: [REDIS_CLIENT],
    };
  }
}
