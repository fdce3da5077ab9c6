import {
  Inject,
  Injectable,
  Logger,
  Module,
  type DynamicModule,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { Cluster } from 'ioredis';
import { DistributedLockModule, LockService } from '@app/distributed-lock';
import { APP_RUNTIME, type AppRuntime } from './app.runtime.js';
import {
  AppExceptionFilter,
  mapLockError,
} from './common/app-exception.filter.js';
import { ConfigModule } from './config/config.module.js';
import { CouponModule } from './coupon/coupon.module.js';
import { DatabaseModule } from './database/database.module.js';
import { HealthModule } from './health/health.module.js';
import { OrderModule } from './order/order.module.js';
import { RedisModule } from './redis/redis.module.js';
import { SeckillModule } from './seckill/seckill.module.js';
import { WebModule } from './web/web.module.js';

/** Closes the runtime after Nest stopped: locks first, then connections, then local servers. */
@Injectable()
class RuntimeCloser implements OnApplicationShutdown {
  constructor(
    @Inject(APP_RUNTIME) private readonly runtime: AppRuntime,
    private readonly locks: LockService,
  ) {}

  async onApplicationShutdown(signal?: string): Promise<void> {
    if (signal) new Logger('FlashSale').log(`${signal}: shutting down`);
    await this.locks.close();
    await this.runtime.close();
  }
}

@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class AppModule {
  static register(runtime: AppRuntime): DynamicModule {
    const { config } = runtime;
    return {
      module: AppModule,
      imports: [
        ConfigModule.register(config),
        RedisModule.forClient(runtime.redis),
        DatabaseModule.forDatabase(runtime.db, runtime.pool),
        DistributedLockModule.forRoot({
          // The locks live on the app's own connection: one server, the
          // master behind Sentinel, or the Redis Cluster.
          ...(runtime.redis instanceof Cluster
            ? { cluster: runtime.redis }
            : { redis: runtime.redis }),
          // A purchase waits this long for the coupon's lock, then gets 429.
          waitTime: config.seckill.waitTime,
          // Holds without a lease are bound to the instance's session: an
          // instance that dies frees its coupon locks within this TTL.
          sessionTtl: config.seckill.sessionTtl,
          freeOnDisconnect: config.seckill.freeOnDisconnect,
          commandTimeout: config.backendTimeout,
          mapError: mapLockError,
          // The distributed_lock_* metrics of /metrics and of the page.
          metrics: true,
          isGlobal: true,
        }),
        OrderModule,
        CouponModule,
        SeckillModule.register(config),
        HealthModule,
        WebModule,
      ],
      providers: [
        { provide: APP_RUNTIME, useValue: runtime },
        { provide: APP_FILTER, useClass: AppExceptionFilter },
        RuntimeCloser,
      ],
    };
  }
}
