import {
  Module,
  RequestMethod,
  type MiddlewareConsumer,
  type NestModule,
} from '@nestjs/common';
import { LockStats } from './lock-stats.js';
import { MetricsController } from './metrics.controller.js';
import { PurchaseMetricsMiddleware } from './purchase-metrics.middleware.js';
import { registerPurchaseMetrics } from './purchase-metrics.js';
import { PurchaseTracker } from './purchase-tracker.js';

/**
 * `/metrics`; the lock figures the page shows, read from the same registry;
 * the purchase counts and times, measured around the purchase route.
 */
@Module({
  controllers: [MetricsController],
  providers: [LockStats, PurchaseTracker],
  exports: [LockStats, PurchaseTracker],
})
export class MetricsModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    registerPurchaseMetrics();
    consumer.apply(PurchaseMetricsMiddleware).forRoutes({
      path: 'api/coupon/seckill/*path',
      method: RequestMethod.POST,
    });
  }
}
