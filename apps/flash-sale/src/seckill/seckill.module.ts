import { Logger, Module, type DynamicModule } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { CouponModule } from '../coupon/coupon.module.js';
import { OrderModule } from '../order/order.module.js';
import { CouponOnSalePipe } from './coupon-on-sale.pipe.js';
import { SeckillPrecheckGuard } from './seckill-precheck.guard.js';
import {
  SeckillController,
  UnlockedSeckillController,
} from './seckill.controller.js';
import { SeckillService } from './seckill.service.js';
import { SoldOutBoard } from './sold-out-board.js';

@Module({})
// oxlint-disable-next-line typescript/no-extraneous-class -- a Nest module
export class SeckillModule {
  /** The locked purchase route, or the unlocked one when SECKILL_LOCK=off (load tests only). */
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
      controllers: [
        config.seckill.lock ? SeckillController : UnlockedSeckillController,
      ],
      providers: [
        SeckillService,
        SoldOutBoard,
        CouponOnSalePipe,
        SeckillPrecheckGuard,
      ],
    };
  }
}
