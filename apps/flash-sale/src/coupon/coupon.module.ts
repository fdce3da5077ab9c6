import { Module } from '@nestjs/common';
import { OrderModule } from '../order/order.module.js';
import { CouponController } from './coupon.controller.js';
import { CouponRepository } from './coupon.repository.js';
import { CouponService } from './coupon.service.js';
import { StockCache } from './stock-cache.js';
import { StockReconciler } from './stock-reconciler.js';
import { StockRepairSchedule } from './stock-repair-schedule.js';

@Module({
  imports: [OrderModule],
  controllers: [CouponController],
  providers: [
    CouponRepository,
    CouponService,
    StockCache,
    StockReconciler,
    StockRepairSchedule,
  ],
  exports: [CouponService, StockReconciler, StockRepairSchedule],
})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class CouponModule {}
