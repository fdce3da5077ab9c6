import { Logger, Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { CouponModule } from '../coupon/coupon.module.js';
import { OrderModule } from '../order/order.module.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillPrecheckGuard } from './seckill-precheck.guard.js';
import { BatchSale } from './batch-sale.js';
import { PurchaseQueue } from './purchase-queue.js';
import { SaleSettlement } from './sale-settlement.js';
import { SaleTurns } from './sale-turns.js';
import { SeckillController } from './seckill.controller.js';
import { SeckillService } from './seckill.service.js';
import { SoldOutBoard } from './sold-out-board.js';

@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class SeckillModule {
  /** The purchase route; says so when SECKILL_LOCK=off sells without the lock (load tests only). */
  static register(config: AppConfig): DynamicModule {
    if (!config.seckill.lock) {
      // The load tool waits for this line to know the mode took effect.
      new Logger('Seckill').warn(
        'SECKILL_LOCK=off: purchases run without the coupon lock (for load tests only)',
      );
    }
    return {
      module: SeckillModule,
      imports: [CouponModule, OrderModule],
      controllers: [SeckillController],
      providers: [
        SeckillService,
        BatchSale,
        SaleSettlement,
        SaleTurns,
        PurchaseQueue,
        SoldOutBoard,
        CouponOnSalePipe,
        SeckillPrecheckGuard,
      ],
    };
  }
}
